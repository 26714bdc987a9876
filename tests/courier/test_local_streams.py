"""The local socket's server: streams on few threads, hellos looked at as they come.

A stream holds a server thread only while one of its messages is answered (socket_server.py):
hundreds of open streams leave the server a handful of threads, a burst of new streams is
served whole, a hello may come in parts, and a peer that says nothing is let go in time.
"""

from __future__ import annotations

import os
import socket
import sys
import threading

import pytest

from launchpad import courier
from launchpad.courier._connection import channels
from launchpad.courier._sockets import (
    records,
    socket_client,
    socket_server,
    socket_wire,
    unix_sockets,
)
from tests.courier.children import ECHO_SERVER, child_server
from tests.courier.conftest import TOKEN

pytestmark = pytest.mark.timeout(120)

STREAMS = 400

@pytest.fixture
def child(monkeypatch):
    """A server in another process, reached over its local socket; yields (pid, address)."""
    monkeypatch.setenv(channels.ENV_TRANSPORT, "local")
    with child_server([sys.executable, "-c", ECHO_SERVER, TOKEN]) as (pid, port):
        yield pid, f"127.0.0.1:{port}"


def _threads_of(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def test_hundreds_of_open_streams_leave_the_server_a_few_threads(child):
    pid, address = child
    clients = [courier.Client(address, token=TOKEN) for _ in range(STREAMS)]
    try:
        for i, client in enumerate(clients):
            assert client.identity(i) == i
        assert courier.transport_of(clients[0]) == "local"
        # A thread per stream would be STREAMS threads and more.
        assert _threads_of(pid) < 40
        for i, client in enumerate(clients):  # every idle stream still answers
            assert client.identity(-i) == -i
        assert _threads_of(pid) < 40
    finally:
        for client in clients:
            courier.close(client)


def test_a_burst_of_new_streams_is_served_whole(child):
    _, address = child
    start = threading.Barrier(STREAMS)
    answers: list = [None] * STREAMS

    def call(i: int) -> None:
        client = courier.Client(address, token=TOKEN)
        try:
            start.wait(timeout=60)
            answers[i] = client.identity(i)
        except Exception as e:  # noqa: BLE001 - the test names what failed
            answers[i] = e
        finally:
            courier.close(client)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(STREAMS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=90)
    failed = [answer for i, answer in enumerate(answers) if answer != i]
    assert not failed, f"{len(failed)} of {STREAMS} calls failed, e.g. {failed[0]!r}"


# ---------------------------------------------------------------------------- hellos


def _connect(server: courier.Server) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    sock.connect(unix_sockets.socket_path(unix_sockets.socket_dir(), "127.0.0.1",
                                           server.port, None))
    return sock


def _hello_record() -> bytes:
    body = socket_wire.hello(TOKEN, "")
    return bytes([socket_wire.HELLO]) + len(body).to_bytes(8, "little") + body


def test_a_hello_that_comes_in_parts_is_answered(serve, service):
    server = serve(service, token=TOKEN)
    record = _hello_record()
    with _connect(server) as sock:
        for part in (record[:3], record[3:12], record[12:]):
            sock.sendall(part)
        kind, _ = records.Reader(sock, max_length=socket_wire.HELLO_MAX).read()
    assert kind == socket_wire.ANSWER


@pytest.mark.parametrize("sent", ["nothing", "half a hello", "no hello"])
def test_a_peer_without_a_whole_hello_is_let_go_after_the_handshake_time(
        serve, service, monkeypatch, sent):
    monkeypatch.setattr(socket_server, "HANDSHAKE_SECS", 0.5)
    server = serve(service, token=TOKEN)
    record = _hello_record()
    with _connect(server) as sock:
        if sent == "half a hello":
            sock.sendall(record[:len(record) // 2])
        elif sent == "no hello":
            sock.sendall(bytes([socket_wire.MESSAGE]) + record[1:])
        try:  # the socket's timeout: 30 s
            closed = sock.recv(1) == b""
        except ConnectionResetError:  # (closed with bytes unread)
            closed = True
        assert closed
    monkeypatch.undo()  # (a client's first stream may wait longer than 0.5 s for a call)
    client = courier.Client(server.address, token=TOKEN, transport="local")
    try:
        assert client.identity(1) == 1  # and it serves on
    finally:
        courier.close(client)


def test_stopping_a_server_ends_its_stream_threads(serve, service):
    server = serve(service, token=TOKEN)
    clients = [courier.Client(server.address, token=TOKEN, transport="local")
               for _ in range(20)]
    try:
        for client in clients:
            assert client.identity(1) == 1
        threads = [t for t in threading.enumerate() if t.name.startswith("courier-local")]
        assert threads
        server.stop()
        for thread in threads:
            thread.join(timeout=10)
        assert not [t.name for t in threads if t.is_alive()]
    finally:
        for client in clients:
            courier.close(client)


def test_a_client_polls_for_the_reply_to_a_lone_call_only(serve, service, monkeypatch):
    """A message of many calls pays one wake-up for all of them: its stream's thread blocks
    for the reply, leaving the interpreter to the thread that queues the next calls."""
    server = serve(service, token=TOKEN)
    client = courier.Client(server.address, token=TOKEN, transport="local")
    polls: list[tuple[int, float]] = []  # (calls in the message, how long its reply is polled)
    exchange, spin = socket_client.SocketStream.exchange, records.Reader._spin
    sending = threading.local()

    def counted_exchange(self, chunks, caller_waits=False, calls=1):
        sending.calls = calls
        return exchange(self, chunks, caller_waits, calls)

    def recorded_spin(self, into, secs):
        if getattr(sending, "calls", None) is not None:
            polls.append((sending.calls, secs))
        return spin(self, into, secs)

    try:
        assert client.identity(0) == 0  # connected
        monkeypatch.setattr(socket_client.SocketStream, "exchange", counted_exchange)
        monkeypatch.setattr(records.Reader, "_spin", recorded_spin)
        blocked = client.futures.block()  # a message of one call, which holds the server
        assert service.blocker.entered.wait(10)
        # Queued meanwhile: on other streams, whose threads send what is queued by the time
        # they wake, so that some messages (all but never-seen timing: all) hold many calls.
        queued = [client.futures.identity(i) for i in range(64)]
        service.blocker.release.set()
        assert blocked.result(10) is True
        assert [future.result(10) for future in queued] == list(range(64))
        assert client.identity(64) == 64
    finally:
        courier.close(client)
    lone = [secs for calls, secs in polls if calls == 1]
    many = [secs for calls, secs in polls if calls > 1]
    assert lone and many, polls
    assert all(secs > 0 for secs in lone) and not any(many), polls
