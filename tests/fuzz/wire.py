"""Hostile courier input, built field by field so that any field may lie.

The formats are those serialization.py, records.py and unix_sockets.py document, written
out again here: a frame is `<B kind><Q call id><H name length><I buffer count>`, the name,
one `<Q>` length per part (the top bit: the part is a shared-memory reference), the parts;
a record is `<B kind><Q length>` and its body.
"""

from __future__ import annotations

import pickle
import struct

from hypothesis import strategies as st

from launchpad.courier._sockets import socket_wire

FRAME_HEADER = struct.Struct("<BQHI")
LENGTH = struct.Struct("<Q")
RECORD_HEADER = struct.Struct("<BQ")
REFERENCE = struct.Struct("<IQQQ")  # a shared-memory part: fd, nonce, offset, length
SHARED = 1 << 63
CALL, RESULT, ERROR = 1, 2, 3
U64 = (1 << 64) - 1
# Lengths a reader must take care with: around its limits, and the largest there are.
TELLING_LENGTHS = [0, 1, 64 << 10, (64 << 10) + 1, 32 << 20, (32 << 20) + 1, 1 << 40,
                   socket_wire.MAX_MESSAGE, socket_wire.MAX_MESSAGE + 1, SHARED, U64]


def frame(kind: int, call_id: int, name: bytes, parts: list[bytes], *,
          name_length: int | None = None, count: int | None = None,
          lengths: list[int] | None = None) -> bytes:
    """One frame's bytes; the keyword fields, where given, say what the bytes do not."""
    lengths = [len(part) for part in parts] if lengths is None else lengths
    return b"".join([
        FRAME_HEADER.pack(kind, call_id, len(name) if name_length is None else name_length,
                          len(parts) - 1 if count is None else count),
        name, *(LENGTH.pack(length) for length in lengths), *parts])


def record(kind: int, body: bytes, length: int | None = None) -> bytes:
    return RECORD_HEADER.pack(kind, len(body) if length is None else length) + body


def call_pickle(args: tuple, kwargs: dict | None = None) -> bytes:
    """A call's arguments as the server unpickles them."""
    return pickle.dumps((args, kwargs or {}), protocol=5)


# A value a call may carry: plain data, nested a little.
values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=8)
# What a frame's pickle may be: a call's arguments, any value, or no pickle at all.
pickles = st.one_of(
    st.builds(lambda args: call_pickle(tuple(args)), st.lists(values, max_size=3)),
    st.builds(lambda value: pickle.dumps(value, protocol=5), values),
    st.binary(max_size=40))
names = st.one_of(st.sampled_from([b"identity", b"ping", b"", b"_private", b"__call__",
                                   b"__list_methods__", "méthode".encode()]),
                  st.binary(max_size=20))
kinds = st.one_of(st.sampled_from([CALL, RESULT, ERROR, CALL | 0x80]), st.integers(0, 255))
lying_lengths = st.one_of(st.sampled_from(TELLING_LENGTHS), st.integers(0, U64))


@st.composite
def frames(draw, parts=pickles) -> bytes:
    """A frame, honest or with one field that lies (or cut short, or with bytes after)."""
    kind = draw(kinds)
    call_id = draw(st.one_of(st.integers(0, 8), st.integers(0, U64)))
    name = draw(names)
    drawn = [draw(parts)] + draw(st.lists(st.binary(max_size=30), max_size=3))
    lie = draw(st.sampled_from([None, "name_length", "count", "length", "shared", "cut"]))
    fields: dict = {}
    if lie == "name_length":
        fields["name_length"] = draw(st.integers(0, 0xFFFF))
    elif lie == "count":
        fields["count"] = draw(st.one_of(st.integers(0, 16), st.integers(0, 0xFFFFFFFF)))
    elif lie in ("length", "shared"):
        lengths = [len(part) for part in drawn]
        lengths[draw(st.integers(0, len(drawn) - 1))] = (
            draw(lying_lengths) if lie == "length" else SHARED | draw(st.integers(0, 64)))
        fields["lengths"] = lengths
    encoded = frame(kind, call_id, name, drawn, **fields)
    if lie == "cut":
        encoded = encoded[:draw(st.integers(0, len(encoded)))]
    return encoded


@st.composite
def messages(draw, parts=pickles) -> bytes:
    """A message of hostile frames, or bytes of any kind, or an honest call spoiled."""
    how = draw(st.sampled_from(["frames", "bytes", "spoiled"]))
    if how == "frames":
        return b"".join(draw(st.lists(frames(parts), min_size=1, max_size=3)))
    if how == "bytes":
        return draw(st.binary(max_size=200))
    message = frame(CALL, 1, b"identity", [draw(parts)])
    at = draw(st.integers(0, len(message) - 1))
    spoil = draw(st.sampled_from(["cut", "flip", "insert"]))
    if spoil == "cut":
        return message[:at]
    if spoil == "flip":
        return message[:at] + bytes([message[at] ^ draw(st.integers(1, 255))]) + message[at + 1:]
    return message[:at] + draw(st.binary(min_size=1, max_size=16)) + message[at:]
