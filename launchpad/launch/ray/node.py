"""A node as a Ray actor: the actor runs the node runner, and the launcher's proxy of it.

    NodeActor (in a Ray worker process, wherever Ray places it)
      run(spec)  -> runner.run_process: the same runner as every launcher's (node_started,
                    heartbeats, the node's code, node_finished / node_failed) -> exit code
      end()      -> what the node started is ended, then the actor's process (the SIGTERM
                    of other launchers: asked only after the grace period)
    RayNodeWorker (in the controller's process, an ending.NodeWorker)
      start()    -> a new actor, then run(spec); a thread waits for the result: the exit
                    code, or Ray's word that the actor died (its process killed, its Ray node
                    lost) -> on_exit(worker), and the supervisor decides (fail or restart by
                    the group's lp.RestartPolicy; Ray's own max_restarts stays 0)

Each run gets a fresh actor, so a restarted node starts in a fresh process, as under every
other launcher; an actor whose run has returned is killed at once (the node's threads go with
its process). This module imports Ray only when a worker starts: the actor class itself is
plain Python, made remote by the launcher.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from absl import logging

from launchpad.launch.node_process import process_tree, runner
from launchpad.launch.runtime import spec
from launchpad.launch.runtime.ending import NodeWorker
from launchpad.launch.runtime.errors import LaunchError

EXIT_ACTOR_DIED = -int(signal.SIGKILL)  # as a killed process reports it
# A run's result is awaited in slices this long, so that close() stops the wait (a Ray get
# cannot be cancelled from another thread).
_RESULT_POLL_SECS = 1.0


class NodeActor:
    """Runs one node in this Ray worker process (see the module doc)."""

    def __init__(self, name: str):
        self._name = name

    def __repr__(self) -> str:
        return self._name  # Ray prefixes the actor's output with it: "(learner/0 pid=...)"

    def run(self, node_spec: bytes) -> int:
        code = runner.run_process(spec.decode(node_spec))
        process_tree.end_descendants()
        return code

    def end(self) -> None:
        runner.exit_process(128 + int(signal.SIGTERM))


class RayNodeWorker(NodeWorker):
    """One node's actor as its launcher sees it (an ending.NodeWorker); restartable.

    Ray ends a process that uses its client after `ray.shutdown()`, so `close()` (called
    before the launch lets its connection go) ends the worker's use of Ray for good: the
    thread that waits for a run's result stops, the actor of a run still going is killed, and
    a restart after that is refused.

    Args:
      name: the node's name, "label/index".
      node_spec: the node's spec (encoded).
      make_actor: makes a new actor for a run (the remote class with the group's options).
      on_exit: called with this worker once each run has ended.
    """

    def __init__(self, name: str, node_spec: bytes, make_actor: Callable[[], Any],
                 on_exit: Callable[[RayNodeWorker], None]):
        self.name = name
        self.attempt = -1
        self.returncode: int | None = None
        self.ended_by_launcher = False
        self.spawned_at: float | None = None  # when the current run's actor was asked for
        self._spec = node_spec
        self._make_actor = make_actor
        self._on_exit = on_exit
        self._lock = threading.Lock()
        self._ended = threading.Event()
        self._closed = threading.Event()
        self._waiters: list[threading.Thread] = []
        self._actor: Any = None
        self._death = ""

    def start(self) -> None:
        """Starts (or, once ended, restarts) the node in a new actor.

        Raises:
          LaunchError: the worker is closed (its program has ended).
        """
        with self._lock:
            if self._closed.is_set():
                raise LaunchError(f"Node {self.name} cannot start: its program has ended")
            self._ended.clear()
            self.returncode, self.ended_by_launcher, self._death = None, False, ""
            self.spawned_at = None  # (before the attempt: see Supervisor._never_came_up)
            self.attempt += 1
            self._actor = self._make_actor()
            # Timed from here: an actor Ray cannot place (its resources never free) never
            # starts its run, and nothing else would say so.
            self.spawned_at = time.monotonic()
            result = self._actor.run.remote(self._spec)
            waiter = threading.Thread(target=self._wait, args=(self._actor, result),
                                      daemon=True, name=f"lp-ray-{self.name}")
            self._waiters.append(waiter)
        waiter.start()

    restart = start

    def _wait(self, actor: Any, result: Any) -> None:
        import ray
        death = ""
        while True:
            try:
                code = ray.get(result, timeout=_RESULT_POLL_SECS)
                break
            except ray.exceptions.GetTimeoutError:
                if self._closed.is_set():
                    return  # the launch is letting Ray go: no call to it from now on
            except ray.exceptions.RayError as e:  # the actor died, or could not start
                code, death = EXIT_ACTOR_DIED, _first_line(e)
                break
        with self._lock:
            self._kill(actor)
            if actor is not self._actor:
                return  # an earlier run's: the node has been restarted since
            self.returncode, self._death = code, death
            self._ended.set()
        try:
            self._on_exit(self)
        except Exception:  # noqa: BLE001 - the thread that reports the end must finish
            logging.exception("Reporting the end of node %s failed", self.name)

    def join(self, timeout: float) -> bool:
        return self._ended.wait(timeout)

    def terminate(self) -> bool:
        with self._lock:
            if self._running():
                self.ended_by_launcher = True
                self._actor.end.remote()
        return True

    def kill(self) -> None:
        with self._lock:
            if self._running():
                self.ended_by_launcher = True
                self._kill(self._actor)

    def close(self) -> None:
        """Ends this worker's use of Ray (see the class doc); returns once it has."""
        with self._lock:
            if self._running():
                self.ended_by_launcher = True
                self._kill(self._actor)
            self._closed.set()
            waiters = list(self._waiters)
        for waiter in waiters:
            waiter.join(_RESULT_POLL_SECS + 1.0)

    def _running(self) -> bool:
        return not self._ended.is_set() and self._actor is not None and not self._closed.is_set()

    def _kill(self, actor: Any) -> None:
        import ray
        if self._closed.is_set():
            return
        try:
            ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001 - gone already: nothing to end
            pass

    def describe_end(self) -> str:
        if self._death:
            return f"its Ray actor died ({self._death})"
        return f"its Ray actor's run returned exit code {self.returncode}"


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def actor_options(needs: Mapping[str, Any]) -> dict[str, Any]:
    """The `.options(...)` of a node's actor: its resources (and placement), room for `end()`
    while `run()` is under way (two calls at once), and no restarts by Ray itself."""
    return {**needs, "max_concurrency": 2, "max_restarts": 0}
