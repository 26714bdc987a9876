"""A program's stop: one sequence, in one order, and who is told at each step.

    begin()   the program is stopping (once; a second stop does nothing)
    run(...)  1. whoever waits for the stop is told (`stop_future`: nodes in other
                 processes, through the controller protocol)
              2. every node context of this process is told (its stop event, its handlers)
              3. the workers end: grace, SIGTERM, SIGKILL (ending.py)
              4. whoever waits for the end is told (`end_future`)
              5. the controller's own closing, then the launchers' `on_finish` callbacks
              6. `finished`: `wait()` returns

A context made while the program stops is told at once (`add_context`).
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Sequence

from absl import logging

from launchpad import context
from launchpad.courier import settle
from launchpad.launch.runtime import ending


class ProgramStop:
    """The stop of program `program_name` (see the module doc)."""

    def __init__(self, program_name: str):
        self._program_name = program_name
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        self.finished = threading.Event()
        self._contexts: list[context.NodeContext] = []
        self._stop_waiters: list[concurrent.futures.Future] = []
        self._end_waiters: list[concurrent.futures.Future] = []
        self._ended_nodes = False
        self._finish_callbacks: list[Callable[[], None]] | None = []  # None once taken

    def add_context(self, node_context: context.NodeContext) -> None:
        """Tells `node_context` when the program stops (now, if it is stopping)."""
        with self._lock:
            self._contexts.append(node_context)
            stopping = self.stopping.is_set()
        if stopping:
            node_context.notify_stop()

    def stop_future(self) -> concurrent.futures.Future:
        """A future set when the program starts stopping."""
        return self._future(self._stop_waiters, lambda: self.stopping.is_set())

    def end_future(self) -> concurrent.futures.Future:
        """A future set when the stop has ended every node (a node process still alive then
        was missed, and ends itself)."""
        return self._future(self._end_waiters, lambda: self._ended_nodes)

    def _future(self, waiters: list, done: Callable[[], bool]) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if not done():
                waiters.append(future)
                return future
        future.set_result(True)
        return future

    def on_finish(self, callback: Callable[[], None]) -> None:
        """Calls `callback()` once every node has ended, before `finished` (now, if they
        have all ended already)."""
        with self._lock:
            if self._finish_callbacks is not None:
                self._finish_callbacks.append(callback)
                return
        callback()

    def begin(self, first: Callable[[], None]) -> bool:
        """Marks the program stopping, calling `first()` (under the lock that decides it);
        False if it was stopping already."""
        with self._lock:
            if self.stopping.is_set():
                return False
            self.stopping.set()
            first()
        return True

    def run(self, workers: Callable[[], Sequence[ending.NodeWorker]], grace: float,
            before_ending: Callable[[], None], after_ending: Callable[[], None],
            close: Callable[[], None]) -> None:
        """The sequence (see the module doc): `before_ending()` runs once the contexts are
        told (restarts under way finish), `after_ending()` once the workers have ended, and
        `close()` before the launchers' callbacks."""
        with self._lock:
            contexts = list(self._contexts)
            stop_waiters, self._stop_waiters = self._stop_waiters, []
        for future in stop_waiters:
            settle(future, True)
        for node_context in contexts:
            node_context.notify_stop()
        before_ending()
        ending.end_workers(workers(), grace, f"of program {self._program_name}")
        after_ending()
        with self._lock:
            callbacks, self._finish_callbacks = self._finish_callbacks or [], None
            self._ended_nodes = True
            end_waiters, self._end_waiters = self._end_waiters, []
        for future in end_waiters:
            settle(future, True)
        close()
        for callback in callbacks:
            try:
                callback()
            except Exception:  # noqa: BLE001 - cleanup of one launcher must not block wait()
                logging.exception("Cleanup of program %s failed", self._program_name)
        self.finished.set()
