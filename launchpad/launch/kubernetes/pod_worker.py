"""A node's pod, as the controller's pod of a Kubernetes program sees it: a `PodWorker`, a
proxy that knows its pod only through the node's own reports (the supervisor tells it, see
supervisor.py), because the controller does not watch pods::

    node_started(instance)            -> the run is on (heartbeats from now on)
    node_finished / node_failed       -> the run has ended: 0 / 1, the supervisor decides
    no heartbeat for the liveness timeout  -> lost (the supervisor's own doing): kill()
    not started within startup_timeout_secs -> failed: its pod is pending or cannot start
    restart()                         -> waits for the pod Kubernetes starts again; a run
                                         that was lost is run again on new objects first
                                         (`rerun`, where the controller may make them)

A lost run is one whose pod went silent: its host lost, or the pod frozen. Kubernetes runs
no new pod of a Job whose pod it still counts as running (an unreachable host's pods are
evicted only after their NoExecute toleration, five minutes by default), so waiting for it
would outlast the startup timeout: with `rerun` (KubernetesSettings(allow_changes=True),
running_nodes.py) the node's old Job is deleted and a new one made, which runs elsewhere.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from launchpad.launch.runtime.ending import NodeWorker

_FAILED = 1  # the exit code a node's runner gives when its node raised


class PodWorker(NodeWorker):
    """A node's pod, as its controller sees it (see the module doc; a NodeWorker).

    Args:
      name: the node, 'label/index'.
      startup_timeout_secs: how long its pod may take to start, each run.
      on_end: called with this worker once a run has ended (Controller.worker_ended).
      rerun: makes the node's objects anew, by its name (RunningNodes.rerun), for a run that
        was lost; None: wait for Kubernetes to run its pod again.
    """

    ended_by_launcher = False
    spawned_at = None  # the pod's start is timed here (startup_timeout_secs), not there

    def __init__(self, name: str, startup_timeout_secs: float,
                 on_end: Callable[[PodWorker], None],
                 rerun: Callable[[str], None] | None = None):
        self.name = name
        self.attempt = 0
        self.returncode: int | None = None
        self._startup_timeout = startup_timeout_secs
        self._on_end = on_end
        self._rerun = rerun
        self._lost = False  # the current run was given up (kill())
        self._lock = threading.Lock()
        self._ended = threading.Event()
        self._how = ""
        self._instance: str | None = None  # the current run, once its pod has started
        # A run of the next attempt that started (and maybe ended) before restart() was
        # called: Kubernetes re-runs a pod on its own clock, not the supervisor's.
        self._early: str | None = None
        self._early_end: bool | None = None
        self._timer: threading.Timer | None = None

    def start(self) -> None:
        """Starts waiting for the first run's pod."""
        self._arm()

    def _arm(self) -> None:
        self._timer = threading.Timer(self._startup_timeout, self._not_started,
                                      (self.attempt,))
        self._timer.daemon = True
        self._timer.start()

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _not_started(self, attempt: int) -> None:
        with self._lock:
            if self._instance is not None or self.attempt != attempt or self._ended.is_set():
                return
        self._end(_FAILED, f"its pod did not start within {self._startup_timeout:g}s (it "
                           "may be pending: no Kubernetes node has the resources it asks "
                           "for, or its image cannot be pulled)")

    def run_started(self, instance: str) -> None:
        """The node's runner reported it started (supervisor.py)."""
        with self._lock:
            if self._ended.is_set():
                self._early, self._early_end = instance, None
                return
            self._instance = instance
            self._disarm()

    def run_reported(self, instance: str, finished: bool) -> None:
        """The node's run `instance` reported how it ended (supervisor.py)."""
        with self._lock:
            if instance == self._early:
                self._early_end = finished
                return
            if instance != self._instance or self._ended.is_set():
                return
        self._end(0 if finished else _FAILED,
                  "its node finished" if finished else "its node raised")

    def _end(self, returncode: int, how: str) -> None:
        with self._lock:
            if self._ended.is_set():
                return
            self.returncode, self._how = returncode, how
            self._ended.set()
            self._disarm()
        self._on_end(self)

    def describe_end(self) -> str:
        return f"pod of attempt {self.attempt + 1}: {self._how}"

    def join(self, timeout: float) -> bool:
        return self._ended.wait(timeout)

    def terminate(self) -> bool:
        return False  # a pod is ended by Kubernetes (deleting it), not by its controller

    def kill(self) -> None:
        """The run is given up (lost, or the program killed): it counts as ended here; its
        pod, if it still runs, ends by itself once it finds its run given up."""
        with self._lock:
            if self._ended.is_set():
                return
            self.returncode, self._how = None, "given up by its controller"
            self._lost = True
            self._ended.set()
            self._disarm()

    def restart(self) -> None:
        """Waits for the pod Kubernetes runs again (its Job's backoffLimit allows it); a run
        that was lost is first given new objects, where `rerun` can make them.

        Raises:
          LaunchError: Kubernetes refused the new objects (named).
        """
        with self._lock:
            self.attempt += 1
            self.returncode, self._how = None, ""
            rerun = self._rerun if self._lost else None
            self._lost = False
            # (a run of the old Job that started meanwhile is not the new objects')
            self._instance, self._early = (None if rerun else self._early), None
            early_end, self._early_end = self._early_end, None
            self._ended.clear()
        if rerun is not None:
            rerun(self.name)
        if self._instance is None:
            self._arm()
        elif early_end is not None:
            self._end(0 if early_end else _FAILED,
                      "its node finished" if early_end else "its node raised")
