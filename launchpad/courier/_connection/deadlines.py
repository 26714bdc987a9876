"""A client's call deadlines (`call_timeout`): futures that outlive theirs fail, named by
the client."""

from __future__ import annotations

import heapq
import itertools
import threading
import time
import weakref
from collections.abc import Callable

from launchpad.courier._connection.in_flight import settle


class DeadlineWatcher:
    """Fails futures that outlive their call_timeout.

    One thread per client runs while calls are in flight; it wakes for the earliest deadline,
    not for every call, and at least once a second to drop calls that have finished, and it
    ends when none is left. Futures are held weakly: a blocking call's future (and its
    result) is freed when the call returns, long before its deadline would have come up.
    """

    _TIDY_SECS = 1.0

    def __init__(self):
        self._heap: list = []
        self._condition = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._order = itertools.count()

    def watch(self, future, seconds: float, make_error: Callable[[], Exception]) -> None:
        entry = (time.monotonic() + seconds, next(self._order), weakref.ref(future), make_error)
        with self._condition:
            if self._closed:
                return
            heapq.heappush(self._heap, entry)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="courier-deadlines",
                                                daemon=True)
                self._thread.start()
            elif self._heap[0] is entry:  # the thread sleeps until a later deadline
                self._condition.notify()

    def close(self) -> None:
        with self._condition:
            self._closed = True
            self._condition.notify()

    def _run(self) -> None:
        with self._condition:
            while not self._closed:
                heap = self._heap
                while heap and _finished(heap[0][2]):
                    heapq.heappop(heap)
                if heap and heap[0][0] <= time.monotonic():
                    _, _, future_ref, make_error = heapq.heappop(heap)
                    future = future_ref()
                    if future is not None:
                        settle(future, exception=make_error())
                    continue
                self._heap = heap = [e for e in heap if not _finished(e[2])]
                heapq.heapify(heap)
                if not heap:
                    break
                self._condition.wait(min(heap[0][0] - time.monotonic(), self._TIDY_SECS))
            self._thread = None


def _finished(future_ref: weakref.ref) -> bool:
    future = future_ref()
    return future is None or future.done()
