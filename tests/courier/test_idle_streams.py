"""Idle streams that end: a client tells a stream that ended from a server that is gone.

A local client's stream thread once looked at its stream (a peek at the socket) while a
blocking call drove that stream, took the call's reply waiting there for the server's end of
the stream, and failed the call and every other call of the connection with "Courier server
at ... went away", the server alive and well. And a stream the server ended alone broke the
whole connection, where a new stream would have done.
"""

from __future__ import annotations

import queue
import select
import threading

import pytest

from launchpad.courier._connection import channels, stream_threads
from launchpad.courier._sockets import socket_client
from launchpad.courier._wire import serialization
from tests.courier.conftest import TOKEN, TRANSPORTS

pytestmark = pytest.mark.timeout(30)

_WAIT_SECS = 10.0


class _WakeCounter:
    """Stands in for a stream's outbox and counts the times its thread woke with nothing to
    send (each followed by that thread's look at its stream)."""

    def __init__(self, outbox: queue.SimpleQueue):
        self._outbox = outbox
        self._woke = threading.Semaphore(0)

    def put(self, item) -> None:
        self._outbox.put(item)

    def empty(self) -> bool:
        return self._outbox.empty()

    def get(self, timeout: float | None = None):
        try:
            return self._outbox.get(timeout=timeout)
        except queue.Empty:
            self._woke.release()
            raise

    def wait_for_a_whole_look(self) -> bool:
        """Waits until the thread has looked at its stream once from start to end since this
        was called (its next wake-up, then the one after it); False if it did not (it ended
        meanwhile)."""
        while self._woke.acquire(blocking=False):
            pass
        return all(self._woke.acquire(timeout=_WAIT_SECS) for _ in range(2))


@pytest.fixture
def looks_often(monkeypatch):
    """Stream threads look at their idle stream every 10 ms, and a local stream is looked at
    however recently it was answered."""
    monkeypatch.setattr(stream_threads, "_CHECK_IDLE_SECS", 0.01)
    monkeypatch.setattr(socket_client, "_FRESH_SECS", 0.0)


def test_a_streams_thread_leaves_alone_the_stream_a_blocking_call_drives(
        serve, connect, service, looks_often):
    """The reply of a blocking call waits in the socket, unread, while the thread of the
    stream it travels on wakes and looks: the call still gets its reply."""
    server = serve(service, token=TOKEN)
    client = connect(server, token=TOKEN, transport="local")
    assert client.futures.ping().result(timeout=_WAIT_SECS) == "pong"  # a stream and its thread
    (stream,) = client._slot.connection._pool.streams
    wakes = stream.outbox = _WakeCounter(stream.outbox)
    receive = stream.transport.receive
    looked = []

    def receive_once_its_thread_looked():
        stream.transport.receive = receive
        assert select.select([stream.transport._sock], [], [], _WAIT_SECS)[0], "no reply came"
        looked.append(wakes.wait_for_a_whole_look())
        return receive()

    stream.transport.receive = receive_once_its_thread_looked
    assert client.add(2, 3) == 5
    assert looked == [True]


@pytest.fixture(params=["in-process", "local"])
def ending_transport(request, monkeypatch) -> str:
    """The transports whose servers can end one idle stream while they serve on (a gRPC
    server ends its streams only as it stops, and then its channel is not ready)."""
    monkeypatch.setenv(channels.ENV_TRANSPORT, TRANSPORTS[request.param])
    return request.param


def _driven_ping(client) -> str:
    """A blocking call on a stream (in-process, a plain blocking call takes none: it is a
    direct call, direct_calls.py)."""
    parts = serialization.dumps_call_arguments("ping", (), {})
    return client._send("ping", parts, drive=True).result()


@pytest.mark.usefixtures("ending_transport", "looks_often")
@pytest.mark.parametrize("found_by", ["the next call", "its thread"])
def test_a_stream_the_server_ended_alone_is_let_go_and_the_other_calls_go_on(
        serve, connect, service, found_by):
    server = serve(service, token=TOKEN)
    client = connect(server, token=TOKEN)
    blocked = client.futures.block()  # busy on one stream until released
    assert service.blocker.entered.wait(_WAIT_SECS)
    busy_peers = set(server._dispatcher._streams)
    conn = client._slot.connection
    if found_by == "its thread":
        assert client.futures.ping().result(timeout=_WAIT_SECS) == "pong"
    else:
        assert _driven_ping(client) == "pong"  # driven: its stream has no thread
    (ended,) = {stream for stream in conn._pool.streams if not stream.pending}
    (peer,) = set(server._dispatcher._streams) - busy_peers

    peer.cancel()  # the server ends the idle stream, and serves on
    if found_by == "its thread":
        ended._thread.join(_WAIT_SECS)  # it looked at its stream and let it go
        assert not ended._thread.is_alive()
    assert _driven_ping(client) == "pong"
    service.blocker.release.set()
    assert blocked.result(timeout=_WAIT_SECS) is True  # its connection did not break
    assert client._slot.connection is conn and not conn.broken
    assert ended not in conn._pool.streams


@pytest.mark.usefixtures("courier_transport", "looks_often")
def test_a_streams_thread_that_finds_its_server_gone_breaks_the_connection(
        serve, connect, service):
    server = serve(service, token=TOKEN)
    client = connect(server, token=TOKEN)
    assert client.futures.ping().result(timeout=_WAIT_SECS) == "pong"
    conn = client._slot.connection
    (stream,) = conn._pool.streams
    server.stop()
    stream._thread.join(_WAIT_SECS)
    assert not stream._thread.is_alive()
    assert conn.broken and "went away" in str(conn.error)
