"""Ending what a launcher started: the grace period, then SIGTERM, then SIGKILL.

One way for every kind of worker (a thread, a node process on this host or forked by a host
agent, a colocated child process, a Ray actor): each is given until the grace period is over
to end by itself, then asked to end (SIGTERM to a process group), then, 3 s later, ended
(SIGKILL). A thread cannot be signalled: it gets the same 3 s, then is named in a warning and
left to end with its process.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Sequence

from absl import logging

# After SIGTERM, a process gets this long to end before SIGKILL.
KILL_AFTER_TERMINATE_SECS = 3.0


class NodeWorker(abc.ABC):
    """What a launcher hands the controller for each thread, process, actor or pod it
    started: every launcher's worker is a subclass, which implements the abstract methods,
    and overrides the hooks whose defaults do not fit it."""

    name: str
    returncode: int | None = None  # how it ended (Controller.exit_codes); None while running
    attempt: int = 0  # 0 for the first run, +1 for each restart
    ended_by_launcher: bool = False  # it was signalled by its launcher (so it did not fail)
    # When the current run's process or actor was made (time.monotonic()); None until then,
    # and for workers whose runs report their start at once (a thread) or are timed by their
    # engine (a pod). The supervisor fails a run not started within the startup timeout.
    spawned_at: float | None = None
    pid: int = 0  # its process's id on this host; 0 where it has none here

    @abc.abstractmethod
    def describe_end(self) -> str:
        """How it ended as its launcher saw it, e.g. 'killed by signal SIGKILL'."""

    @abc.abstractmethod
    def join(self, timeout: float) -> bool:
        """Waits up to `timeout` seconds; True if the worker has finished."""

    @abc.abstractmethod
    def terminate(self) -> bool:
        """Asks the worker to end now (SIGTERM); False if it cannot be ended (a thread)."""

    @abc.abstractmethod
    def kill(self) -> None:
        """Ends the worker at once (SIGKILL); does nothing to a thread."""

    @abc.abstractmethod
    def restart(self) -> None:
        """Starts the worker's node again (after it failed)."""

    def retire(self) -> None:
        """Its group shrinks: asks its node to stop gracefully (its stop event, its stop
        handlers). Workers in another process need nothing: their node learns it from the
        controller (`wait_for_stop` of that node); a thread's is told here."""
        return None

    def run_started(self, instance: str) -> None:
        """The node's runner reported that its run `instance` started. A worker whose runs
        its launcher cannot see end (a pod, which the cluster runs and re-runs) learns of
        them from the node this way, and from `run_reported`; others need nothing."""
        return None

    def run_reported(self, instance: str, finished: bool) -> None:
        """The node reported how its run `instance` ended (`finished`: without failing)."""
        return None


def end_workers(workers: Sequence[NodeWorker], grace: float, whose: str) -> None:
    """Ends `workers` as the module doc says; returns once each has ended (or been left).

    Args:
      workers: what to end; those that have ended already are skipped.
      grace: seconds they get to end by themselves (0: SIGTERM at once).
      whose: completes "Node NAME ..." in the warnings, e.g. "of program p".
    """
    deadline = time.monotonic() + grace
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
    late = [w for w in workers if not w.join(0)]
    terminated = [w for w in late if w.terminate()]
    deadline = time.monotonic() + KILL_AFTER_TERMINATE_SECS
    for worker in late:
        if worker.join(max(0.0, deadline - time.monotonic())):
            continue
        if worker in terminated:
            logging.warning("Node %s %s ignored SIGTERM; killing it", worker.name, whose)
            worker.kill()
        else:
            logging.warning("Node %s %s did not stop within termination_notice_secs=%gs "
                            "(+%gs) and cannot be killed (a thread); it is left behind",
                            worker.name, whose, grace, KILL_AFTER_TERMINATE_SECS)
    for worker in terminated:
        if not worker.join(KILL_AFTER_TERMINATE_SECS):
            logging.error("Node %s %s survived SIGKILL", worker.name, whose)
