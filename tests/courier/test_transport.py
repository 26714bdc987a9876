"""Each transport's client stream, driven directly against a real courier server.

The same assertions hold on every transport (in-process, local socket, gRPC). These also
check that grpcio's Cython layer still has the shape the gRPC transport relies on
(`segregated_call` and its operations): a grpcio release that changed it fails here first.
"""

from __future__ import annotations

import concurrent.futures
import struct
import time

import pytest

from launchpad.courier import errors
from launchpad.courier._connection import channels
from launchpad.courier._status import Status
from launchpad.courier._wire import serialization, streams
from launchpad.courier._wire.serialization import Kind
from tests.courier.conftest import TOKEN, TRANSPORTS, assert_server_ends_stream, open_raw_channel

pytestmark = pytest.mark.timeout(30)


def _call_message(call_id: int, method: str, *args) -> bytes:
    parts = serialization.dumps_call_arguments(method, args, {})
    frame = serialization.encode_frame(Kind.CALL, call_id, method, parts)
    return serialization.join_message([frame])


def _results(message: bytes) -> dict[int, object]:
    return {frame.call_id: frame.load() for frame in serialization.decode_message(message)}


@pytest.fixture(params=list(TRANSPORTS))
def channel(server, request):
    channel = open_raw_channel(server, request.param)
    yield channel
    channel.close()


def test_exchange_sends_a_message_and_returns_the_reply(channel):
    stream = channel.open_stream(TOKEN)
    assert _results(stream.exchange([_call_message(1, "add", 2, 3)])) == {1: 5}
    assert _results(stream.exchange([_call_message(2, "ping")])) == {2: "pong"}
    stream.finish()


def test_a_message_may_be_sent_in_several_chunks(channel):
    stream = channel.open_stream(TOKEN)
    message = _call_message(1, "add", 2, 3)
    assert _results(stream.exchange([message[:5], memoryview(message)[5:]])) == {1: 5}
    stream.finish()


def test_receive_collects_replies_that_come_in_several_messages(channel, service):
    stream = channel.open_stream(TOKEN)
    # Two calls in one message: the first runs on a worker and blocks, the second answers
    # at once, so their replies come back in separate messages.
    message = _call_message(1, "block") + _call_message(2, "ping")
    assert _results(stream.exchange([message])) == {2: "pong"}
    service.blocker.release.set()
    assert _results(stream.receive()) == {1: True}
    stream.finish()


def test_cancel_from_another_thread_ends_a_wait(channel, service):
    stream = channel.open_stream(TOKEN)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        reply = pool.submit(stream.exchange, [_call_message(1, "block")])
        assert service.blocker.entered.wait(10)
        stream.cancel()
        with pytest.raises(errors.StreamBroken) as info:
            reply.result(timeout=10)
    assert info.value.code == Status.CANCELLED
    stream.cancel()  # again, on a finished stream: harmless
    assert stream.finish().code == Status.CANCELLED


def test_a_stream_without_the_token_is_refused(channel):
    stream = channel.open_stream("wrong-token")
    with pytest.raises(errors.StreamBroken) as info:
        stream.exchange([_call_message(1, "ping")])
    assert info.value.code == Status.PERMISSION_DENIED
    assert info.value.details == streams.REFUSED_DETAILS
    error = streams.error_for_broken_stream(info.value, "127.0.0.1:1")
    assert "secret token" in str(error)


def test_a_broken_stream_refuses_further_messages(channel, server):
    stream = channel.open_stream(TOKEN)
    assert _results(stream.exchange([_call_message(1, "ping")])) == {1: "pong"}
    stream.cancel()
    with pytest.raises(errors.StreamBroken):
        stream.exchange([_call_message(2, "ping")])
    with pytest.raises(errors.StreamBroken):
        stream.receive()
    stream.finish()


def test_an_idle_stream_is_not_alive_once_its_server_stops(channel, server):
    stream = channel.open_stream(TOKEN)
    assert _results(stream.exchange([_call_message(1, "ping")])) == {1: "pong"}
    assert stream.alive()
    server.stop()
    deadline = time.monotonic() + 10
    while stream.alive() and time.monotonic() < deadline:
        time.sleep(0.02)  # polls: gRPC's channel leaves READY in its own time
    assert not stream.alive()
    with pytest.raises(errors.StreamBroken):  # the server ended the stream
        stream.exchange([_call_message(2, "ping")])
    stream.finish()


@pytest.mark.parametrize("kind", ["in-process", "local"])
def test_a_server_stopped_is_not_found_by_the_fast_transports(server, kind):
    address = server.address
    server.stop()
    assert channels.fast_channel(address, None, TRANSPORTS[kind]) is None


def test_the_environment_variable_and_the_option_choose_the_mode(monkeypatch):
    monkeypatch.setenv(channels.ENV_TRANSPORT, "grpc")
    assert channels.mode_of(None) == "grpc"
    assert channels.mode_of("local") == "local"
    monkeypatch.setenv(channels.ENV_TRANSPORT, "carrier-pigeon")
    with pytest.raises(ValueError, match="LAUNCHPAD_COURIER_TRANSPORT.*carrier-pigeon"):
        channels.mode_of(None)
    assert channels.mode_of("tcp") == "tcp"
    with pytest.raises(ValueError, match="transport must be one of auto, local, tcp, grpc"):
        channels.mode_of("udp")


# --- Malformed input ---

def _bad_kind_message() -> bytes:
    return struct.pack("<BQHI", 99, 1, 0, 0) + struct.pack("<Q", 0)


def _truncated_header_message() -> bytes:
    return b"\x01\x02\x03"


@pytest.mark.parametrize("message", [_bad_kind_message(), _truncated_header_message(), b""],
                         ids=["bad-kind", "truncated-header", "empty"])
def test_malformed_message_ends_its_stream_and_server_keeps_serving(channel, client, message):
    ended = assert_server_ends_stream(channel.open_stream(TOKEN), message)
    assert ended.code == Status.INVALID_ARGUMENT
    assert ended.details.startswith("courier: Malformed courier message"), ended.details
    assert client.ping() == "pong"
