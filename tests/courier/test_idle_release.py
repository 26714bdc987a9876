"""The idle releaser: watched objects are asked when due, and forgotten once they are done."""

from __future__ import annotations

import threading
import time

import pytest

from launchpad.courier._shared_memory import idle_release

pytestmark = pytest.mark.timeout(30)


class _Holder:
    """Answers `release_if_idle` with a due time `delays` seconds on, one per ask, then None
    (nothing left to release); records when it was asked."""

    def __init__(self, *delays: float):
        self._delays = list(delays)
        self.asked: list[float] = []
        self.done = threading.Event()

    def release_if_idle(self, now: float) -> float | None:
        self.asked.append(now)
        if not self._delays:
            self.done.set()
            return None
        return now + self._delays.pop(0)


def test_a_watched_object_is_asked_again_when_due_until_it_is_done():
    holder = _Holder(0.2, 0.2)
    started = time.monotonic()
    idle_release.watch(holder)
    assert holder.done.wait(10)
    assert len(holder.asked) == 3
    assert holder.asked[2] - started >= 0.4  # not before it was due
    idle_release.watch(holder)  # done, it was forgotten: watching it again asks it again
    deadline = time.monotonic() + 10
    while len(holder.asked) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)  # polls: the releaser's thread asks it, with no event to wait on
    assert len(holder.asked) == 4


def test_an_object_due_soon_is_asked_while_the_thread_waits_for_a_later_one():
    late, soon = _Holder(5), _Holder(0.1)
    idle_release.watch(late)
    deadline = time.monotonic() + 10
    while not late.asked and time.monotonic() < deadline:
        time.sleep(0.02)  # polls: until the thread waits for the late one's due
    watched = time.monotonic()
    idle_release.watch(soon)
    assert soon.done.wait(10)
    assert soon.asked[-1] - watched < 2.5, "it waited for the late one's due"
    assert late.done.wait(10)  # asked when due, and done: the thread ends
