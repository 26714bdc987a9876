"""Many queued calls, found at once by a stream's thread, travel as two messages on two
streams (stream_threads.HALVE_FROM), so that the server runs one half while the client settles
the other: every call is answered once, with its own result. Not while another message of
queued calls is out (it overlaps already), nor to a server of this process (one GIL)."""

import threading

import pytest

from launchpad.courier._connection import connection, in_flight
from tests.courier.conftest import TOKEN

pytestmark = [pytest.mark.timeout(30), pytest.mark.usefixtures("courier_transport")]

_CALLS = 40


class _GatedOutbox:
    """A stream's queue whose thread, while `gate` is closed, waits with the first calls it
    took: the calls queued meanwhile are found at once when the gate opens."""

    def __init__(self, inner, gate: threading.Event):
        self._inner = inner
        self._gate = gate

    def put(self, item) -> None:
        self._inner.put(item)

    def get(self, timeout=None):
        item = self._inner.get(timeout=timeout)
        if item is not None:
            assert self._gate.wait(10)
        return item

    def empty(self) -> bool:
        return self._inner.empty()


@pytest.fixture
def gate(monkeypatch) -> threading.Event:
    """Every stream made from now on has a gated queue; the gate starts open."""
    opened = threading.Event()
    opened.set()
    made = in_flight.PooledStream.__init__

    def gated(self, stream):
        made(self, stream)
        self.outbox = _GatedOutbox(self.outbox, opened)

    monkeypatch.setattr(in_flight.PooledStream, "__init__", gated)
    return opened


@pytest.fixture
def messages(monkeypatch) -> list:
    """Spies on the messages sent: (its stream, how many calls it holds) each."""
    sent = []
    exchange = connection.Connection._exchange

    def counted(self, stream, frames, caller_waits=False):
        sent.append((stream, len(frames)))
        return exchange(self, stream, frames, caller_waits)

    monkeypatch.setattr(connection.Connection, "_exchange", counted)
    return sent


def test_many_calls_found_at_once_travel_as_two_halves_on_two_streams(
        server, connect, gate, messages, courier_transport):
    client = connect(server, token=TOKEN)
    assert client.ping() == "pong"  # connected (a driven call: no queue)
    messages.clear()
    gate.clear()
    futures = [client.futures.add(i, i) for i in range(_CALLS)]
    gate.set()
    assert [future.result(timeout=10) for future in futures] == [2 * i for i in range(_CALLS)]
    if courier_transport == "in-process":
        assert [calls for _, calls in messages] == [_CALLS]
    else:
        assert [calls for _, calls in messages] == [_CALLS // 2, _CALLS // 2]
        assert messages[0][0] is not messages[1][0]


def test_calls_queued_while_another_message_is_out_travel_whole(
        server, connect, service, gate, messages):
    client = connect(server, token=TOKEN)
    assert client.ping() == "pong"
    blocked = client.futures.block()  # a message of queued calls, out until released
    assert service.blocker.entered.wait(5)
    messages.clear()
    gate.clear()
    futures = [client.futures.add(i, 1) for i in range(_CALLS)]
    gate.set()
    assert [future.result(timeout=10) for future in futures] == list(range(1, _CALLS + 1))
    assert [calls for _, calls in messages] == [_CALLS]
    service.blocker.release.set()
    assert blocked.result(timeout=10) is True
