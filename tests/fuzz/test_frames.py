"""The decoders alone, on hostile bytes: frames, records, hellos and statuses.

Each either makes sense of its input or refuses it with the one error it documents
(ValueError, EOFError, None): never another exception, never more memory than the input
calls for. And what the encoders make, the decoders read back as it was.
"""

from __future__ import annotations

import os
import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from launchpad.courier._shared_memory import lanes
from launchpad.courier._sockets import records, socket_wire
from launchpad.courier._status import Status
from launchpad.courier._wire import serialization
from launchpad.courier._wire.serialization import Kind
from tests.fuzz import wire
from tests.fuzz.conftest import target

pytestmark = pytest.mark.timeout(120)


@given(message=wire.messages())
@target(150)
def test_a_message_decodes_into_frames_within_it_or_is_refused_as_malformed(message):
    try:
        frames = serialization.decode_message(message)
    except ValueError as e:
        assert str(e).startswith("Malformed courier message")
        return
    assert frames
    for decoded in frames:
        assert isinstance(decoded.kind, Kind) and 0 <= decoded.call_id <= wire.U64
        assert isinstance(decoded.name, str)
        assert all(part.obj is message for part in [decoded.payload, *decoded.buffers])
    assert sum(part.nbytes for f in frames for part in [f.payload, *f.buffers]) <= len(message)


@pytest.fixture
def lane():
    """A lane of this process with itself: its writer's regions, read by its reader."""
    own = lanes.Lane(os.getpid())
    yield own
    own.close()


_large = st.builds(lambda size, byte: bytes([byte]) * size,
                   st.integers(lanes.INLINE_LIMIT, 3 * lanes.INLINE_LIMIT),
                   st.integers(0, 255))
_out_frames = st.lists(st.tuples(
    st.sampled_from(list(Kind)), st.integers(0, wire.U64), st.text(max_size=12),
    st.lists(st.one_of(st.binary(max_size=40), _large), min_size=1, max_size=3)),
    min_size=1, max_size=3)


@pytest.mark.skipif(not lanes.enabled(), reason="needs Linux memfd and /proc")
@given(described=_out_frames, shared=st.booleans())
@target(40)
def test_what_the_encoder_makes_decodes_as_it_was_inline_or_through_shared_memory(
        lane, described, shared):
    lane.writer.reset()
    out = [serialization.encode_frame(kind, call_id, name, parts)
           for kind, call_id, name, parts in described]
    message = serialization.join_message(out, lane.writer if shared else None)
    decoded = serialization.decode_message(message, lane.reader if shared else None)
    assert [(f.kind, f.call_id, f.name, [bytes(f.payload), *map(bytes, f.buffers)])
            for f in decoded] == [(kind, call_id, name, parts)
                                  for kind, call_id, name, parts in described]
    invited = [f.invites_shared_memory for f in decoded]
    assert invited == [shared and kind == Kind.CALL for kind, *_ in described]


@given(sent=st.lists(st.one_of(
    st.builds(wire.record, st.integers(0, 255), st.binary(max_size=100)),
    st.builds(wire.record, st.integers(0, 255), st.binary(max_size=100), wire.lying_lengths),
    st.binary(max_size=20)), max_size=4), max_length=st.sampled_from(
        [socket_wire.HELLO_MAX, socket_wire.MAX_MESSAGE]))
@target(150)
def test_a_reader_takes_whole_records_then_refuses_or_ends(sent, max_length):
    """Whatever arrives before the peer closes: whole records, each within the reader's
    bound, then EOFError, or ValueError for a record it will not hold; the memory of a
    length that lies is never taken (records.py maps what is beyond its heap's reach)."""
    left, right = socket.socketpair()
    with left, right:
        left.sendall(b"".join(sent))
        left.shutdown(socket.SHUT_WR)
        reader = records.Reader(right, max_length=max_length)
        for _ in range(len(sent) + 1):
            try:
                kind, body = reader.read()
            except EOFError:
                return
            except ValueError as e:
                assert "longer than" in str(e)
                return
            assert 0 <= kind <= 255 and len(body) <= max_length
    pytest.fail("more records were read than were sent")


@given(body=st.one_of(
    st.builds(socket_wire.hello, st.text(max_size=20), st.text(max_size=20)),
    st.builds(lambda hello, at: hello[:at], st.builds(socket_wire.hello, st.text(
        max_size=20), st.text(max_size=20)), st.integers(0, 40)),
    st.builds(lambda tail: socket_wire.MAGIC + tail, st.binary(max_size=40)),
    st.binary(max_size=60)))
@target(200)
def test_a_hello_is_read_as_its_token_and_probe_or_is_none(body):
    parsed = socket_wire.parse_hello(body)
    if parsed is not None:
        token, probe = parsed
        assert socket_wire.hello(token, probe) == body  # nothing in it was left unread


@given(body=st.binary(min_size=1, max_size=40))
@target(100)
def test_a_status_is_read_as_a_code_and_its_details(body):
    code, details = socket_wire.status_of(body)
    assert isinstance(code, Status) and isinstance(details, str)
