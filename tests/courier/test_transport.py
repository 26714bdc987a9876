"""The transport's client stream, driven directly against a real courier server.

These also check that grpcio's Cython layer still has the shape the transport relies on
(`segregated_call` and its operations): a grpcio release that changed it fails here first.
"""

from __future__ import annotations

import concurrent.futures
import threading

import grpc
import pytest

from launchpad.courier import serialization, transport
from launchpad.courier.serialization import Kind
from tests.courier.conftest import TOKEN

pytestmark = pytest.mark.timeout(30)


def _call_message(call_id: int, method: str, *args) -> bytes:
    parts = serialization.dumps_call_arguments(method, args, {})
    frame = serialization.encode_frame(Kind.CALL, call_id, method, parts)
    return serialization.join_message([frame])


def _results(message: bytes) -> dict[int, object]:
    return {frame.call_id: frame.load() for frame in serialization.decode_message(message)}


@pytest.fixture
def channel(server):
    channel = transport.open_channel(server.address, compress=False)
    assert transport.wait_until_ready(channel, 10)
    yield channel
    channel.close()


def test_exchange_sends_a_message_and_returns_the_reply(channel):
    stream = transport.Stream(channel, TOKEN)
    assert _results(stream.exchange(_call_message(1, "add", 2, 3))) == {1: 5}
    assert _results(stream.exchange(_call_message(2, "ping"))) == {2: "pong"}
    stream.finish()


def test_receive_collects_replies_that_come_in_several_messages(channel, service):
    stream = transport.Stream(channel, TOKEN)
    # Two calls in one message: the first runs on a worker and blocks, the second answers
    # at once, so their replies come back in separate messages.
    message = _call_message(1, "block") + _call_message(2, "ping")
    assert _results(stream.exchange(message)) == {2: "pong"}
    service.blocker.release.set()
    assert _results(stream.receive()) == {1: True}
    stream.finish()


def test_cancel_from_another_thread_ends_a_wait(channel, service):
    stream = transport.Stream(channel, TOKEN)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        reply = pool.submit(stream.exchange, _call_message(1, "block"))
        assert service.blocker.entered.wait(10)
        stream.cancel()
        with pytest.raises(transport.StreamBroken) as info:
            reply.result(timeout=10)
    assert info.value.code == grpc.StatusCode.CANCELLED
    stream.cancel()  # again, on a finished stream: harmless
    assert stream.finish().code == grpc.StatusCode.CANCELLED


def test_a_stream_without_the_token_is_refused(channel):
    stream = transport.Stream(channel, "wrong-token")
    with pytest.raises(transport.StreamBroken) as info:
        stream.exchange(_call_message(1, "ping"))
    assert info.value.code == grpc.StatusCode.PERMISSION_DENIED
    error = transport.error_for_broken_stream(info.value, "127.0.0.1:1")
    assert "secret token" in str(error)


def test_a_broken_stream_refuses_further_messages(channel, server):
    stream = transport.Stream(channel, TOKEN)
    assert _results(stream.exchange(_call_message(1, "ping"))) == {1: "pong"}
    stream.cancel()
    with pytest.raises(transport.StreamBroken):
        stream.exchange(_call_message(2, "ping"))
    with pytest.raises(transport.StreamBroken):
        stream.receive()


def test_channel_is_ready_once_connected_and_not_after_the_server_stops(channel, server):
    assert transport.channel_is_ready(channel)
    stream = transport.Stream(channel, TOKEN)
    assert _results(stream.exchange(_call_message(1, "ping"))) == {1: "pong"}
    server.stop()
    with pytest.raises(transport.StreamBroken):  # the server ended the stream
        stream.receive()
    left_ready = threading.Event()

    def on_state(state: grpc.ChannelConnectivity) -> None:
        if state != grpc.ChannelConnectivity.READY:
            left_ready.set()

    channel.subscribe(on_state)
    try:
        assert left_ready.wait(10)
        assert not transport.channel_is_ready(channel)
    finally:
        channel.unsubscribe(on_state)
