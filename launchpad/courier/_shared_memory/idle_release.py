"""Gives back what an object holds once it has sat idle, without waiting for its next use.

A shared-memory writer (lanes.py) holds a large region between the messages of its
stream, and while the stream is idle nothing calls the writer, so nothing of its own could give
the region back. `watch` hands such an object to this process's releaser: one daemon thread,
running only while some object is watched, that calls the object's `release_if_idle(now)`
when it is due. The object answers when to ask it again, or None once it holds nothing left to
release; it is then forgotten until it is watched again.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from typing import Protocol


class Releasable(Protocol):
    def release_if_idle(self, now: float) -> float | None:
        """Releases what sat idle long enough by `now` (time.monotonic()); returns when to
        ask again, or None when nothing is left to release."""


class _Releaser:
    def __init__(self):
        self._lock = threading.Lock()
        self._watched_again = threading.Condition(self._lock)
        self._watched: weakref.WeakSet[Releasable] = weakref.WeakSet()
        self._running = False

    def watch(self, obj: Releasable) -> None:
        with self._lock:
            if obj in self._watched:
                return  # already asked when due (use only ever makes that later)
            self._watched.add(obj)
            if self._running:
                self._watched_again.notify()  # it may be due before the thread's next look
            else:
                self._running = True
                threading.Thread(target=self._run, name="courier-idle-release",
                                 daemon=True).start()

    def _run(self) -> None:
        with self._lock:
            while True:
                # Asked under the lock, so an object cannot be watched again between its
                # answer and its removal (the wait below lets go of the lock).
                now = time.monotonic()
                due = []
                for obj in list(self._watched):
                    when = obj.release_if_idle(now)
                    if when is None:
                        self._watched.discard(obj)
                    else:
                        due.append(when)
                if not due:
                    self._running = False
                    return
                self._watched_again.wait(max(min(due) - time.monotonic(), 0.0))


_releaser = _Releaser()


def watch(obj: Releasable) -> None:
    """Asks `obj` to release what it holds once idle (see the module doc). Call it without
    holding a lock that `obj.release_if_idle` takes: the releaser holds its own lock while it
    asks."""
    _releaser.watch(obj)


def _forget_in_child() -> None:
    global _releaser
    _releaser = _Releaser()  # a forked child has no releaser thread, and the lock may be held


os.register_at_fork(after_in_child=_forget_in_child)
