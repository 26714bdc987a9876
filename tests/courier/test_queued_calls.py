"""Futures queued on a stream just as its thread starts sending: none is left behind.

The soak (benchmarks/soak_courier.py) lost one future in 357,000 calls: it joined the stream
that was filling, but its frame reached the stream's queue only after the stream's thread had
taken what was there and sent it. That thread then waited for a reply to a call it never sent.
The test makes that interleaving happen every time, with a queue that stalls at the two
moments that matter.
"""

import threading

import pytest

from launchpad.courier._connection import in_flight
from tests.courier.conftest import TOKEN

pytestmark = [pytest.mark.timeout(30), pytest.mark.usefixtures("courier_transport")]


class _StallingOutbox:
    """A stream's queue of frames that, once armed, holds the stream's thread on the first
    message until the second call is being queued, and holds that second call's frame back
    until the first call was answered (or a moment passed, when it cannot be)."""

    def __init__(self, inner, armed: threading.Event, first_answered: threading.Event):
        self._inner = inner
        self._armed = armed
        self._first_answered = first_answered
        self._second_queuing = threading.Event()
        self._puts = 0

    def put(self, item) -> None:
        if self._armed.is_set() and item is not None:
            self._puts += 1
            if self._puts == 2:
                self._second_queuing.set()
                self._first_answered.wait(0.3)
        self._inner.put(item)

    def get(self, timeout=None):
        item = self._inner.get(timeout=timeout)
        if self._armed.is_set() and item is not None and self._puts == 1:
            self._second_queuing.wait(0.5)
        return item

    def empty(self) -> bool:
        return self._inner.empty()


def test_a_future_queued_as_its_stream_starts_sending_is_sent(server, connect, monkeypatch):
    armed, first_answered = threading.Event(), threading.Event()
    made = in_flight.PooledStream.__init__

    def stalling(self, stream):
        made(self, stream)
        self.outbox = _StallingOutbox(self.outbox, armed, first_answered)

    monkeypatch.setattr(in_flight.PooledStream, "__init__", stalling)
    client = connect(server, token=TOKEN)
    assert client.ping() == "pong"  # connected: the next future goes to the filling stream
    armed.set()
    first = client.futures.add(1, 1)
    first.add_done_callback(lambda _: first_answered.set())
    second = client.futures.add(2, 2)
    assert first.result(timeout=10) == 2
    assert second.result(timeout=5) == 4
