"""Hostile messages on real streams, on every transport, with the right token.

Each example is one stream of a real server (in this process, so that a crash would end the
test run): it is answered, or ended with INVALID_ARGUMENT, within seconds; never ended as the
server's own failure (INTERNAL), never left hanging; and a good caller on the same transport
is answered all along (`good_caller`).
"""

from __future__ import annotations

import errno
import socket
import threading

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from launchpad.courier import errors
from launchpad.courier._shared_memory import memory_files
from launchpad.courier._sockets import socket_wire, unix_sockets
from launchpad.courier._sockets.socket_client import SocketStream
from launchpad.courier._status import Status
from launchpad.courier._wire import serialization, streams
from launchpad.courier._wire.serialization import Kind
from tests.courier.conftest import TOKEN, TRANSPORTS, open_raw_channel
from tests.fuzz import wire
from tests.fuzz.conftest import Echo, target

pytestmark = pytest.mark.timeout(120)

WITHIN_SECS = 10.0


def exchange_within(stream: streams.ClientStream,
                    message: bytes) -> bytes | memoryview | errors.StreamBroken:
    """The stream's reply to `message`, or how the server ended it; fails the test if
    neither comes within WITHIN_SECS. The stream is finished either way."""
    outcome: list = []

    def exchange() -> None:
        try:
            outcome.append(stream.exchange([message]))
        except errors.StreamBroken as e:
            outcome.append(e)
        except BaseException as e:  # noqa: BLE001 - reported by the test below
            outcome.append(e)

    thread = threading.Thread(target=exchange, name="fuzz-exchange", daemon=True)
    thread.start()
    thread.join(WITHIN_SECS)
    if thread.is_alive():
        stream.cancel()
        thread.join(WITHIN_SECS)
    stream.finish()
    assert outcome, f"no reply and no end of the stream within {WITHIN_SECS:g} s"
    assert not isinstance(outcome[0], BaseException) or isinstance(
        outcome[0], errors.StreamBroken), f"the client stream raised {outcome[0]!r}"
    return outcome[0]


def assert_answered_or_refused(outcome) -> None:
    """A reply of well-formed results and errors, or the end of a malformed message."""
    if isinstance(outcome, errors.StreamBroken):
        assert outcome.code == Status.INVALID_ARGUMENT, outcome
        assert outcome.details.startswith("courier: "), outcome.details
        return
    replies = serialization.decode_message(outcome)
    assert all(reply.kind in (Kind.RESULT, Kind.ERROR) for reply in replies)


@pytest.fixture(params=list(TRANSPORTS))
def attacked(request, serve, good_caller):
    """(a raw channel of the transport, the good caller) of a server under attack."""
    server = serve(Echo(), token=TOKEN)
    channel = open_raw_channel(server, request.param)
    caller = good_caller(server, TRANSPORTS[request.param])
    yield channel, caller
    channel.close()


@given(message=wire.messages())
@target(60)
def test_a_malformed_message_ends_only_its_own_stream(attacked, message):
    channel, caller = attacked
    assert_answered_or_refused(exchange_within(channel.open_stream(TOKEN), message))
    assert not caller.failures


# ------------------------------------------------------ the local socket and the TCP port

def _socket_path(server) -> str:
    return unix_sockets.socket_path(unix_sockets.socket_dir(), "127.0.0.1", server.port, None)


def _tcp_port(server) -> tuple[str, int]:
    channel = open_raw_channel(server, "grpc")
    try:
        return "127.0.0.1", channel.offered_tcp_port()
    finally:
        channel.close()


def converse(where: str | tuple[str, int], sent: bytes) -> list[tuple[int, bytes]]:
    """Connects to a server's local socket (a path) or TCP port (host, port), sends `sent`
    and ends what it sends; returns the records the server sent until it closed the
    connection (within WITHIN_SECS)."""
    family = socket.AF_UNIX if isinstance(where, str) else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    received = b""
    try:
        sock.settimeout(WITHIN_SECS)
        sock.connect(where)
        sock.sendall(sent)
        sock.shutdown(socket.SHUT_WR)
        while chunk := sock.recv(1 << 16):
            received += chunk
    except (ConnectionResetError, BrokenPipeError):
        pass  # it closed with some of what we sent unread: the same end
    except OSError as e:
        if e.errno != errno.ENOTCONN:  # (over TCP, that same end, seen by shutdown)
            raise
    except TimeoutError:
        pytest.fail(f"the server neither closed the connection nor said more within "
                    f"{WITHIN_SECS:g} s")
    finally:
        sock.close()
    found, offset = [], 0
    while offset < len(received):
        kind, length = wire.RECORD_HEADER.unpack_from(received, offset)
        offset += wire.RECORD_HEADER.size
        found.append((kind, received[offset:offset + length]))
        offset += length
        assert offset <= len(received), "the server sent part of a record"
    return found


# The hellos a stream may open with: the right one, with a probe of any kind; a wrong
# token; one that is no hello; none at all.
hellos = st.one_of(
    st.builds(lambda probe: (True, wire.record(socket_wire.HELLO, socket_wire.hello(
        TOKEN, probe))), st.one_of(st.just(""), st.text(max_size=20).filter(
            lambda text: ":" not in text))),
    st.builds(lambda token: (False, wire.record(socket_wire.HELLO, socket_wire.hello(
        token, ""))), st.text(max_size=30).filter(lambda token: token != TOKEN)),
    st.builds(lambda kind, body, length: (False, wire.record(kind, body, length)),
              st.integers(0, 255), st.binary(max_size=40),
              st.one_of(st.none(), wire.lying_lengths)),
    st.just((False, b"")))
records = st.lists(st.one_of(
    st.builds(wire.record, st.just(socket_wire.MESSAGE), wire.messages()),
    st.builds(wire.record, st.just(socket_wire.MESSAGE), wire.messages(), wire.lying_lengths),
    st.builds(wire.record, st.integers(0, 255), st.binary(max_size=30)),
    st.binary(max_size=20)), max_size=3)


@pytest.fixture(params=["local", "tcp"])
def local_attacked(request, serve, good_caller):
    """(where: the socket path or the TCP port, the good caller) of a server under attack on
    its local socket or its TCP port, which speak the same records."""
    server = serve(Echo(), token=TOKEN)
    where = _socket_path(server) if request.param == "local" else _tcp_port(server)
    return where, good_caller(server, request.param)


@pytest.mark.skipif(unix_sockets.socket_dir() is None, reason="no local socket directory")
@given(opening=hellos, sent=records)
@target(60)
def test_hostile_records_on_a_socket_end_only_their_connection(local_attacked, opening,
                                                               sent):
    where, caller = local_attacked
    admitted, hello = opening
    answered = converse(where, hello + b"".join(sent))
    kinds = [kind for kind, _ in answered]
    if not admitted:  # nothing but its refusal, if it was a hello at all
        assert kinds in ([], [socket_wire.STATUS]), kinds
        if kinds:
            assert socket_wire.status_of(answered[0][1])[0] == (
                Status.PERMISSION_DENIED)
    else:
        assert kinds[0] == socket_wire.ANSWER and kinds[-1] == socket_wire.STATUS, kinds
        assert set(kinds[1:-1]) <= {socket_wire.MESSAGE}, kinds
        code, details = socket_wire.status_of(answered[-1][1])
        assert code in (Status.OK, Status.INVALID_ARGUMENT), (code, details)
        for _, reply in answered[1:-1]:
            assert_answered_or_refused(reply)
    assert not caller.failures


@pytest.mark.skipif(unix_sockets.socket_dir() is None, reason="no local socket directory")
def test_a_record_too_long_to_hold_ends_its_stream_as_malformed(local_attacked):
    path, _ = local_attacked
    hello = wire.record(socket_wire.HELLO, socket_wire.hello(TOKEN, ""))
    answered = converse(path, hello + wire.record(socket_wire.MESSAGE, b"", 1 << 61))
    assert [kind for kind, _ in answered] == [socket_wire.ANSWER, socket_wire.STATUS]
    code, details = socket_wire.status_of(answered[1][1])
    assert code == Status.INVALID_ARGUMENT
    assert "longer than this process can hold" in details


# ----------------------------------------------------------------------------- a hostile server

_server_records = st.lists(st.one_of(
    st.builds(wire.record, st.sampled_from([socket_wire.ANSWER, socket_wire.MESSAGE,
                                            socket_wire.STATUS]), st.binary(max_size=40)),
    st.builds(wire.record, st.integers(0, 255), st.binary(max_size=20), wire.lying_lengths),
    st.just(wire.record(socket_wire.ANSWER, (memory_files.local_probe() or "").encode())),
    st.builds(lambda code, details: wire.record(socket_wire.STATUS,
                                                socket_wire.status(code, details)),
              st.sampled_from(list(Status)), st.text(max_size=20)),
    st.binary(max_size=20)), max_size=4)


@given(sent=_server_records)
@example(sent=[wire.record(socket_wire.ANSWER, b"\xff\xfe")])  # an answer of no UTF-8
@target(100)
def test_a_local_client_stream_takes_what_a_server_sends_as_a_reply_or_its_end(sent):
    ours, theirs = socket.socketpair()
    try:
        theirs.sendall(b"".join(sent))
        theirs.shutdown(socket.SHUT_WR)
        stream = SocketStream(ours, TOKEN, offer_shared_memory=True)
        try:
            reply = stream.exchange([b"a message"])
            assert isinstance(reply, (bytes, memoryview))
        except errors.StreamBroken as e:
            assert isinstance(e.code, Status)
        finally:
            stream.finish()
    finally:
        theirs.close()
