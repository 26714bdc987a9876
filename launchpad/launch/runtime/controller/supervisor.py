"""Supervision of a running program: what each unit is doing, and what happens when one ends.

A *unit* is what runs, ends and restarts as one (a node, or the colocation holding it); its
launcher gave the controller one worker for it (a thread, a process, a job step). Two sources
say how a run of a unit ended, and the supervisor joins them::

    the node itself (controller protocol): node_started(instance) -> heartbeats
                                           -> node_finished / node_failed(reason, traceback)
    its launcher:                          worker_ended(worker): the thread returned, the
                                           process exited (code or signal), the step ended
    liveness (this module):                no heartbeat for `liveness_timeout_secs`: the run
                                           is lost (its host, a SIGKILL on another machine);
                                           no node_started within `startup_timeout_secs` of
                                           its worker's `spawned_at`: the run never came up
                                           (an interpreter or import that hangs at start-up,
                                           an actor whose resources never become free)

A run ends when its worker ends (or it is declared lost); its reason is the one the node
reported, else what the launcher saw. Then: finished -> the unit is done (all done: the
program stops); failed -> restarted if its group's RestartPolicy allows, else the program
stops and `wait()` raises NodeFailedError for the first unit that failed.

A worker whose end its launcher cannot see (a Kubernetes pod, which the cluster runs and
re-runs) learns of its runs from the node instead: the supervisor tells every worker
`run_started(instance)` and `run_reported(instance, finished)` (ending.NodeWorker).
"""

from __future__ import annotations

import pickle
import threading
import time
from collections.abc import Callable

from absl import logging

from launchpad.launch.runtime import errors, terminals
from launchpad.launch.runtime.controller.node_book import NodeBook
from launchpad.launch.runtime.controller.registry import AddressRegistry, NodeKey
from launchpad.launch.runtime.ending import KILL_AFTER_TERMINATE_SECS, NodeWorker
from launchpad.program import RestartPolicy

_FINISHED = None  # a report of a run that finished


class Supervisor:
    """See the module doc; thread-safe.

    Args:
      program_name: names the program in errors.
      units: every unit of the program.
      restart_policies: group label -> lp.RestartPolicy.
      registry: the program's addresses (a unit's are forgotten when it ends or restarts).
      stop: starts the program's stop sequence.
      liveness_timeout_secs: how long a run that heartbeats may go silent.
      book: where each unit's state is written for the program's status.
      startup_timeout_secs: how long a run's process (or actor) may take, once made, to
        report that it started.
    """

    def __init__(self, program_name: str, units: set[NodeKey], restart_policies: dict,
                 registry: AddressRegistry, stop: Callable[[], None],
                 liveness_timeout_secs: float, book: NodeBook,
                 startup_timeout_secs: float):
        self._program = program_name
        self._book = book
        self._policies = restart_policies
        self._registry = registry
        self._stop = stop
        self._liveness_timeout = liveness_timeout_secs
        self._startup_timeout = startup_timeout_secs
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._running = set(units)
        self._workers: dict[NodeKey, NodeWorker] = {}
        self._instances: dict[NodeKey, str] = {}  # the current run of each unit
        self._hosts: dict[NodeKey, tuple[str, int]] = {}  # (host, pid) of the current run
        self._heartbeats: dict[NodeKey, float] = {}  # last heartbeat of runs that send them
        self._reports: dict[NodeKey, tuple | None] = {}  # how the current run said it ended
        self._concluded: dict[NodeKey, int] = {}  # the last attempt of each unit that ended
        self._restarts: dict[NodeKey, int] = {}
        self._retiring: set[NodeKey] = set()  # units a shrinking group is ending
        self._timers: list[threading.Timer] = []
        self._restarts_under_way = 0
        self._stopping = False
        self.failure: errors.NodeFailedError | None = None
        self._closed = threading.Event()
        threading.Thread(target=self._watch_liveness, name=f"lp-liveness-{program_name}",
                         daemon=True).start()

    # --- what launchers tell ------------------------------------------------------------

    def add_worker(self, worker: NodeWorker) -> None:
        with self._lock:
            self._workers[_key(worker.name)] = worker

    def add_unit(self, unit: NodeKey) -> None:
        """A group grew by `unit` (its launcher adds its worker next)."""
        with self._lock:
            self._running.add(unit)

    def set_restart_policy(self, label: str, policy: RestartPolicy | None) -> None:
        """Group `label` (one the running program gained) restarts as `policy` says (an
        lp.RestartPolicy; None: its nodes fail fast)."""
        with self._lock:
            if policy is None:
                self._policies.pop(label, None)
            else:
                self._policies[label] = policy

    def retire(self, unit: NodeKey) -> NodeWorker | None:
        """A group shrinks by `unit`: however its run ends now, it finished (no restart, no
        failure of the program; a traceback is logged). Returns its worker."""
        with self._lock:
            self._retiring.add(unit)
            return self._workers.get(unit)

    def forget_unit(self, unit: NodeKey) -> None:
        """A retired unit has ended: it is no more."""
        with self._lock:
            for kept in (self._workers, self._concluded, self._restarts, self._reports):
                kept.pop(unit, None)
            self._retiring.discard(unit)
            self._running.discard(unit)

    def workers(self) -> list[NodeWorker]:
        with self._lock:
            return list(self._workers.values())

    def worker_ended(self, worker: NodeWorker) -> None:
        """The worker's thread, process or step has ended (its `returncode` is set)."""
        unit = _key(worker.name)
        with self._lock:
            if self._concluded.get(unit, -1) >= worker.attempt:
                return  # this run was declared lost already
            self._concluded[unit] = worker.attempt
            outcome = self._reports.pop(unit, "none")
            self._forget_run(unit)
            retiring = unit in self._retiring
        if retiring and outcome not in ("none", _FINISHED) and worker.returncode != 0:
            logging.warning("Node %s of %s failed as its group shrank: %s\n%s", _name(unit),
                            self._program, outcome[0], outcome[1])
        if worker.returncode == 0 or worker.ended_by_launcher or retiring:
            self._finished(unit)
        elif outcome not in ("none", _FINISHED):
            # Its exit (code 1: it raised) says nothing the node's report did not.
            self._failed(unit, *outcome)
        else:
            self._failed(unit, worker.describe_end())

    # --- what nodes tell (the controller protocol) --------------------------------------

    def started(self, unit: NodeKey, instance: str, host: str, pid: int,
                heartbeats: bool) -> None:
        """A runner started the unit; a run that `heartbeats` is lost once silent."""
        with self._lock:
            self._instances[unit] = instance
            self._hosts[unit] = (host, pid)
            self._reports.pop(unit, None)
            if heartbeats:
                self._heartbeats[unit] = time.monotonic()
            self._changed.notify_all()
            worker = self._workers.get(unit)
        self._book.started(unit, instance, host, pid)
        if worker is not None:
            worker.run_started(instance)

    def heartbeat(self, unit: NodeKey, instance: str) -> bool:
        """False: the run is no longer the unit's current one (it was declared lost)."""
        with self._lock:
            if self._instances.get(unit) != instance:
                return False
            self._heartbeats[unit] = time.monotonic()
            return True

    def reported(self, unit: NodeKey, instance: str, outcome: tuple | None) -> None:
        """How the run `instance` ended: None finished, else (reason, traceback, pickled
        exception); acted upon when its worker ends."""
        reason, node_traceback, pickled = outcome or (None, None, b"")
        cause = None
        if pickled:
            try:
                cause = pickle.loads(pickled)
            except Exception:  # noqa: BLE001 - of a class unknown here: the text remains
                cause = None
        with self._lock:
            if self._instances.get(unit) != instance:
                return  # a run given up already
            self._reports[unit] = _FINISHED if outcome is None else (
                reason, node_traceback, cause)
            worker = self._workers.get(unit)
        if worker is not None:
            worker.run_reported(instance, outcome is None)

    def placements(self) -> dict[str, tuple[str, int]]:
        """'label/index' -> (host, pid) of each running unit, as its runner reported."""
        with self._lock:
            return {_name(unit): where for unit, where in self._hosts.items()}

    # --- liveness -------------------------------------------------------------------------

    def _watch_liveness(self) -> None:
        period = min(1.0, self._liveness_timeout / 4, self._startup_timeout / 4)
        while not self._closed.wait(period):  # a clock, not a wait for an event
            now = time.monotonic()
            with self._lock:
                silent = [u for u, at in self._heartbeats.items()
                          if now - at > self._liveness_timeout and u in self._running]
                unstarted = [u for u in self._running if self._never_came_up(u, now)]
                lost = []
                for unit in silent + unstarted:
                    worker = self._workers.get(unit)
                    if worker is None:
                        continue
                    self._concluded[unit] = worker.attempt
                    self._forget_run(unit)
                    lost.append(worker)
            for worker in lost:
                threading.Thread(target=worker.kill, daemon=True,
                                 name=f"lp-kill-{worker.name}").start()
                if _key(worker.name) in unstarted:
                    reason = (f"did not start within startup_timeout_secs="
                              f"{self._startup_timeout:g}: its runner never reported to the "
                              "controller (its interpreter or an import at start-up hangs, "
                              "or the resources it needs never become free)")
                else:
                    reason = (f"stopped answering: no heartbeat for "
                              f"{self._liveness_timeout:g}s (its host may be lost, or its "
                              "process frozen)")
                self._failed(_key(worker.name), reason)

    def _never_came_up(self, unit: NodeKey, now: float) -> bool:
        """Whether the unit's current run was made (its worker's `spawned_at`) longer than
        the startup timeout ago and has not reported that it started (lock held)."""
        worker = self._workers.get(unit)
        if worker is None or unit in self._instances:
            return False
        attempt = worker.attempt  # read before spawned_at: a restart resets it first
        if self._concluded.get(unit, -1) >= attempt:
            return False  # that run has ended (a restart may be due)
        spawned_at = worker.spawned_at
        return spawned_at is not None and now - spawned_at > self._startup_timeout

    def _forget_run(self, unit: NodeKey) -> None:
        self._instances.pop(unit, None)
        self._hosts.pop(unit, None)
        self._heartbeats.pop(unit, None)

    # --- outcomes ---------------------------------------------------------------------------

    def _finished(self, unit: NodeKey) -> None:
        self._book.finished(unit)
        with self._lock:
            self._running.discard(unit)
            self._changed.notify_all()
            self._registry.node_ended(unit, f"node {_name(unit)} has finished")
            all_done = not self._running
        if all_done:
            self._stop()

    def _failed(self, unit: NodeKey, reason: str, node_traceback: str = "",
                cause: BaseException | None = None) -> None:
        restarted = self._restart_if_allowed(unit, reason)
        self._book.failed(unit, reason, node_traceback, restarted)
        if restarted:
            return
        with self._lock:
            self._running.discard(unit)
            self._changed.notify_all()
            self._registry.node_ended(unit, f"node {_name(unit)} failed")
            if self._stopping or self.failure is not None:
                logging.warning("Node %s of %s failed while the program was stopping: %s",
                                _name(unit), self._program, reason)
                return
            self.failure = errors.node_failure(self._program, _name(unit), reason,
                                               node_traceback, cause,
                                               self._restarts.get(unit, 0))
        # One line now (the program may take its grace period to stop); the failure itself
        # is said once, by wait() raising it (or the exit printing it, if nothing waits).
        what = (type(cause).__name__ if cause is not None
                else reason.partition(":")[0] if node_traceback else reason)
        terminals.say(f"node {_name(unit)} of program {self._program!r} failed ({what}); "
                      f"stopping the program")
        self._stop()

    def _restart_if_allowed(self, unit: NodeKey, reason: str) -> bool:
        policy = self._policies.get(unit[0])
        with self._lock:
            restarts = self._restarts.get(unit, 0)
            worker = self._workers.get(unit)
            if (policy is None or restarts >= policy.max_restarts or self._stopping
                    or worker is None):
                return False
            self._restarts[unit] = restarts + 1
            self._changed.notify_all()
            # Lookups of the node now wait for it to register again; its clients reconnect.
            self._registry.node_restarting(unit)
            delay = policy.delay(restarts + 1)
            timer = threading.Timer(delay, self._restart, (worker,))
            timer.daemon = True
            self._timers.append(timer)
        logging.warning("Node %s of program %s failed: %s; restarting it in %gs "
                        "(restart %d of %d)", _name(unit), self._program, reason, delay,
                        restarts + 1, policy.max_restarts)
        timer.start()
        return True

    def _restart(self, worker: NodeWorker) -> None:
        with self._lock:
            if self._stopping:
                return
            self._restarts_under_way += 1
        try:
            worker.join(KILL_AFTER_TERMINATE_SECS)  # a run declared lost is being killed
            try:
                worker.restart()
            except Exception as e:  # noqa: BLE001 - a node that cannot restart has failed
                self._failed(_key(worker.name), f"restart failed: {type(e).__name__}: {e}")
        finally:
            with self._lock:
                self._restarts_under_way -= 1
                self._changed.notify_all()

    def wait_for_restarts_under_way(self) -> None:
        """Returns once no restart is half done: the stop sequence then ends a node that was
        restarting as it ends every other, instead of finding it ended and going on to clean
        up while it starts again."""
        with self._lock:
            self._changed.wait_for(lambda: self._restarts_under_way == 0)

    # --- what the controller asks -------------------------------------------------------

    def program_stopping(self) -> None:
        """No more restarts; failures from now on are logged, not raised."""
        with self._lock:
            self._stopping = True
            for timer in self._timers:
                timer.cancel()

    def all_ended(self, why: str) -> None:
        """The stop sequence has ended every worker: every unit is over."""
        with self._lock:
            for unit in list(self._running):
                self._registry.node_ended(unit, why)
            self._running.clear()
            self._changed.notify_all()
        self._book.all_ended()
        self._closed.set()

    def wait_for_units(self, units: set[NodeKey], first: bool, stop_on_failure: bool,
                       timeout: float | None) -> bool:
        """Blocks until every unit of `units` has ended (with `first`: one of them), or, with
        `stop_on_failure`, until the program has failed; False if `timeout` passed first."""
        def done() -> bool:
            if stop_on_failure and self.failure is not None:
                return True
            ended = units - self._running
            return bool(ended) if first else ended == units

        with self._changed:
            return self._changed.wait_for(done, timeout)

    def wait_for_unit(self, unit: NodeKey, timeout: float | None) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: unit not in self._running, timeout)

    def wait_for_started(self, unit: NodeKey, timeout: float | None) -> bool:
        with self._changed:
            return self._changed.wait_for(
                lambda: unit in self._hosts or unit not in self._running, timeout) \
                and unit in self._hosts

    def wait_for_restarts(self, unit: NodeKey, count: int, timeout: float | None) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self._restarts.get(unit, 0) >= count,
                                          timeout)

    def restarts(self) -> dict[str, int]:
        with self._lock:
            return {_name(u): n for u, n in self._restarts.items()}


def _key(name: str) -> NodeKey:
    label, _, index = name.rpartition("/")
    return label, int(index)


def _name(unit: NodeKey) -> str:
    return f"{unit[0]}/{unit[1]}"
