"""Nothing of a stream without the right token is unpickled, on any transport.

Every message here carries MkdirOnUnpickle payloads (tests/hostile.py: unpickling one makes a
directory) in frames that are otherwise valid calls, among hostile frames. A stream with no
token or a wrong one (any text: non-ASCII ones too), or whose token does not come the way the
transport takes it (a record of another kind, another metadata key), is refused and the
directory never appears, in-process, on the local socket and over gRPC; the server keeps
serving a good caller. `test_the_payload_is_unpickled_with_the_right_token` shows that
the same frames with the right token are unpickled, so that these checks can fail.
"""

from __future__ import annotations

import pathlib

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from launchpad.courier import errors
from launchpad.courier._grpc import grpc_client
from launchpad.courier._sockets import socket_wire, unix_sockets
from launchpad.courier._status import Status
from launchpad.courier._wire import streams
from tests.courier.conftest import TOKEN, TRANSPORTS, open_raw_channel
from tests.fuzz import wire
from tests.fuzz.conftest import Echo, target
from tests.fuzz.test_streams import WITHIN_SECS, converse, exchange_within
from tests.hostile import MkdirOnUnpickle

pytestmark = pytest.mark.timeout(120)

MARKER = "created-by-unpickling"
_ASCII = st.characters(min_codepoint=0x20, max_codepoint=0x7E)


def wrong_tokens(alphabet: st.SearchStrategy | None = None) -> st.SearchStrategy[str]:
    """Tokens that are not TOKEN: none, any text, TOKEN with a character changed, cut
    short or followed by more, in another case."""
    alphabet = st.characters() if alphabet is None else alphabet
    text = st.text(alphabet=alphabet, max_size=40)
    return st.one_of(
        st.just(""), text,
        st.builds(lambda at, char: TOKEN[:at] + char + TOKEN[at + 1:],
                  st.integers(0, len(TOKEN) - 1), alphabet),
        st.builds(lambda more: TOKEN + more, text), st.just(TOKEN[:-1]),
        st.just(TOKEN.upper())).filter(lambda token: token.strip() != TOKEN)


def payload_messages(path: pathlib.Path) -> st.SearchStrategy[bytes]:
    """Messages holding at least one call whose arguments make `path` when unpickled."""
    payload = MkdirOnUnpickle(str(path))
    calls = st.builds(
        lambda call_id, name, pickled, buffers: wire.frame(wire.CALL, call_id, name,
                                                           [pickled, *buffers]),
        st.integers(0, wire.U64), st.sampled_from([b"identity", b"ping", b"nope", b""]),
        st.sampled_from([wire.call_pickle((payload,)), wire.call_pickle((), {"value": payload}),
                         wire.call_pickle(([1, {"deep": (payload,)}],))]),
        st.lists(st.binary(max_size=20), max_size=2))
    return st.builds(lambda before, call, after: b"".join([*before, call, *after]),
                     st.lists(wire.frames(), max_size=2), calls,
                     st.lists(st.one_of(calls, wire.frames()), max_size=2))


@pytest.fixture(params=list(TRANSPORTS))
def guarded(request, serve, good_caller, tmp_path):
    """(the transport, a raw channel of it, the marker's path) of a server with a token."""
    server = serve(Echo(), token=TOKEN)
    channel = open_raw_channel(server, request.param)
    good_caller(server, TRANSPORTS[request.param])
    yield request.param, channel, tmp_path / MARKER
    channel.close()


def test_the_payload_is_unpickled_with_the_right_token(guarded):
    kind, channel, marker = guarded
    message = wire.frame(wire.CALL, 1, b"identity", [wire.call_pickle((MkdirOnUnpickle(
        str(marker)),))])
    assert not isinstance(exchange_within(channel.open_stream(TOKEN), message),
                          errors.StreamBroken)
    assert marker.is_dir()


@given(data=st.data())
@target(40)
def test_a_stream_without_the_right_token_is_refused_before_anything_is_unpickled(guarded,
                                                                                  data):
    kind, channel, marker = guarded
    # gRPC metadata is printable ASCII; the other transports take any text.
    token = data.draw(wrong_tokens(_ASCII if kind == "grpc" else None), label="token")
    message = data.draw(payload_messages(marker), label="message")
    ended = exchange_within(channel.open_stream(token), message)
    assert isinstance(ended, errors.StreamBroken), "a stream with a wrong token was answered"
    assert (ended.code, ended.details) == (Status.PERMISSION_DENIED,
                                           streams.REFUSED_DETAILS)
    assert not marker.exists()


@pytest.mark.parametrize("token", ["jeton-secret-tökén", "\ud800 a lone surrogate"],
                         ids=["non-ascii", "surrogate"])
@pytest.mark.parametrize("kind", ["in-process", "local"])  # (gRPC metadata is ASCII)
def test_tokens_of_any_characters_are_compared_not_refused_as_errors(serve, connect, kind,
                                                                     token):
    """hmac compares only ASCII text: a stream with a token of other characters was ended as
    the server's failure (INTERNAL, a traceback logged), and a server with such a token
    refused everyone. A lone surrogate, which UTF-8 does not encode, failed the local
    client's hello."""
    server = serve(Echo(), token=TOKEN)
    channel = open_raw_channel(server, kind)
    try:
        ended = exchange_within(channel.open_stream(token),
                                wire.frame(wire.CALL, 1, b"ping", [wire.call_pickle(())]))
    finally:
        channel.close()
    assert isinstance(ended, errors.StreamBroken)
    assert (ended.code, ended.details) == (Status.PERMISSION_DENIED,
                                           streams.REFUSED_DETAILS)
    own = serve(Echo(), token=token)
    assert connect(own, token=token, transport=TRANSPORTS[kind]).ping() == "pong"


# ----------------------------------------------------------------------------- the local socket

def _hello_record(token: str, kind: int = socket_wire.HELLO) -> bytes:
    return wire.record(kind, socket_wire.hello(token, ""))


# Openings that do not admit: a wrong token; the right one in a record of another kind, cut
# short, with more after it in its record, or under a length that lies; no hello at all.
_refused_openings = st.one_of(
    st.builds(_hello_record, wrong_tokens()),
    st.builds(lambda kind: _hello_record(TOKEN, kind),
              st.integers(0, 255).filter(lambda kind: kind != socket_wire.HELLO)),
    st.builds(lambda cut: wire.record(socket_wire.HELLO,
                                      socket_wire.hello(TOKEN, "")[:cut]),
              st.integers(0, len(socket_wire.hello(TOKEN, "")) - 1)),
    st.builds(lambda more: wire.record(socket_wire.HELLO, socket_wire.hello(TOKEN, "")
                                       + more), st.binary(min_size=1, max_size=8)),
    st.builds(lambda length: wire.record(socket_wire.HELLO, socket_wire.hello(TOKEN, ""),
                                         length),
              wire.lying_lengths.filter(
                  lambda length: length != len(socket_wire.hello(TOKEN, "")))),
    st.just(b""))


def _guarded(serve, good_caller, tmp_path, transport: str):
    """(a server with a token, with a good caller on `transport`, the marker's path)."""
    server = serve(Echo(), token=TOKEN)
    good_caller(server, transport)
    return server, tmp_path / MARKER


@pytest.fixture
def local_guarded(serve, good_caller, tmp_path):
    return _guarded(serve, good_caller, tmp_path, "local")


@pytest.fixture
def grpc_guarded(serve, good_caller, tmp_path):
    return _guarded(serve, good_caller, tmp_path, "grpc")


@pytest.mark.skipif(unix_sockets.socket_dir() is None, reason="no local socket directory")
@given(data=st.data())
@target(40)
def test_a_local_connection_without_the_right_hello_gets_nothing_unpickled(local_guarded,
                                                                           data):
    server, marker = local_guarded
    opening = data.draw(_refused_openings, label="opening")
    calls = data.draw(st.lists(payload_messages(marker), min_size=1, max_size=3),
                      label="calls")
    path = unix_sockets.socket_path(unix_sockets.socket_dir(), "127.0.0.1", server.port, None)
    answered = converse(path, opening + b"".join(
        wire.record(socket_wire.MESSAGE, call) for call in calls))
    assert [kind for kind, _ in answered] in ([], [socket_wire.STATUS]), answered
    assert not marker.exists()


# ----------------------------------------------------------------------------- gRPC metadata

_metadata = st.lists(st.one_of(
    st.tuples(st.just(grpc_client.TOKEN_METADATA_KEY), wrong_tokens(_ASCII)),
    st.tuples(st.sampled_from(["x-courier-tokens", "x-token", "authorization", "token"]),
              st.just(TOKEN)),
    st.tuples(st.just(grpc_client.TOKEN_METADATA_KEY + "-bin"), st.just(TOKEN.encode())),
    st.tuples(st.just(grpc_client.SHARED_MEMORY_METADATA_KEY),
              st.text(alphabet=_ASCII, max_size=30).map(str.strip))), max_size=3)


@given(data=st.data())
@target(30)
def test_a_grpc_stream_without_the_token_in_its_metadata_gets_nothing_unpickled(
        grpc_guarded, data):
    server, marker = grpc_guarded
    metadata = data.draw(_metadata, label="metadata")
    calls = data.draw(st.lists(payload_messages(marker), min_size=1, max_size=3),
                      label="calls")
    with grpc.insecure_channel(server.address) as channel:
        stream = channel.stream_stream(grpc_client.STREAM_METHOD)
        with pytest.raises(grpc.RpcError) as info:
            for _ in stream(iter(calls), metadata=metadata, timeout=WITHIN_SECS):
                pytest.fail("a stream without the token was answered")
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED, info.value
    assert not marker.exists()
