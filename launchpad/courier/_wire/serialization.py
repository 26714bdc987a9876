"""Wire format of courier messages: frames of pickled payloads with out-of-band buffers.

One message carries one or more frames, so that calls (and results) queued at the same
moment travel together. A frame is::

    header  <B kind><Q call id><H name length><I buffer count>
    name    utf-8 (the method name for a call; empty otherwise)
    lengths <Q> for the pickle, then one <Q> per out-of-band buffer
    pickle  pickle protocol 5 bytes
    buffers the raw bytes of each buffer (numpy array data, bytes-like objects)

The method name travels outside the pickle so a server can refuse an unknown method before it
unpickles anything. A part (the pickle or a buffer) of at least `lanes.INLINE_LIMIT`
bytes may instead lie in a shared-memory region, when the stream has a lane (messages.py):
its length then has the top bit set, and the bytes in the message are a reference to it. The
kind's top bit, on a call, says its sender reads shared memory, so its reply may use it too.

Received parts are read-only: inline ones are views of the gRPC message and shared ones are
copied out of their region, so numpy arrays arrive with one copy at most, and read-only
(`arr.copy()` when you need to write). Pickling uses cloudpickle, so functions, lambdas and
classes defined in `__main__` travel by value.
"""

from __future__ import annotations

import enum
import functools
import pickle
import struct
import traceback
from typing import Any

import cloudpickle

from launchpad.courier import errors
from launchpad.courier._shared_memory import lanes

_HEADER = struct.Struct("<BQHI")
_HEADER_SIZE = _HEADER.size
_LENGTH = struct.Struct("<Q")
_LENGTH_SIZE = _LENGTH.size
_SHARED = 1 << 63  # in a part's length: the part lies in shared memory
_INVITES_SHARED = 0x80  # in a call's kind: its reply may use shared memory


class Kind(enum.IntEnum):
    CALL = 1
    RESULT = 2
    ERROR = 3


_KINDS = {kind.value: kind for kind in Kind}


class Frame:
    """One decoded frame; `payload` and `buffers` are read-only views of its bytes."""

    __slots__ = ("kind", "call_id", "name", "payload", "buffers", "invites_shared_memory")

    def __init__(self, kind: Kind, call_id: int, name: str, payload: memoryview,
                 buffers: list[memoryview], invites_shared_memory: bool = False):
        self.kind = kind
        self.call_id = call_id
        self.name = name
        self.payload = payload
        self.buffers = buffers
        self.invites_shared_memory = invites_shared_memory

    def load(self) -> Any:
        return pickle.loads(self.payload, buffers=self.buffers)


@functools.lru_cache(maxsize=64)
def _lengths_format(count: int) -> struct.Struct:
    return struct.Struct(f"<{count}Q")


def dumps(obj: Any) -> list:
    """Pickles `obj`; returns [pickle bytes, *out-of-band buffers] (buffers are not copied).

    The C pickler is tried first (several times cheaper for the small values most calls
    carry); cloudpickle takes over when it fails (lambdas, local classes) or when the pickle
    refers to `__main__`, which names another module in the receiving process.
    """
    buffers: list[pickle.PickleBuffer] = []
    try:
        data = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
        if b"__main__" not in data:
            return [data, *(b.raw() for b in buffers)]
    except Exception:  # noqa: BLE001 - whatever plain pickle refuses, cloudpickle may take
        pass
    buffers.clear()
    data = cloudpickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    return [data, *(b.raw() for b in buffers)]


class OutFrame:
    """A frame to send: packed into a message by `join_message`, once the stream is known."""

    __slots__ = ("kind", "call_id", "name", "parts")

    def __init__(self, kind: Kind, call_id: int, name: bytes, parts: list):
        self.kind = kind
        self.call_id = call_id
        self.name = name
        self.parts = parts


def encode_frame(kind: Kind, call_id: int, name: str, parts: list) -> OutFrame:
    """A frame of `parts` ([pickle, *buffers], as `dumps` returns them)."""
    return OutFrame(kind, call_id, name.encode(), parts)


def join_message(frames: list[OutFrame], writer: lanes.Writer | None = None) -> bytes:
    """Packs frames into one message (see `message_chunks`)."""
    return b"".join(message_chunks(frames, writer))


def message_chunks(frames: list[OutFrame], writer: lanes.Writer | None = None) -> list:
    """The chunks of one message of `frames`, in order: a transport sends them back to back
    (scatter-gather) or joined. With a lane's writer, large parts go into its shared memory
    (inline if no region can be had), and calls invite shared-memory replies."""
    chunks: list = []
    large: list[tuple[int, int]] = []  # where the length and the bytes of a large part are
    group_parts = False  # whether a part is a group call's (lanes.share)
    limit = lanes.INLINE_LIMIT if writer is not None else None
    for frame in frames:
        kind = frame.kind
        if limit is not None and kind == Kind.CALL:
            kind |= _INVITES_SHARED
        parts = frame.parts
        name = frame.name
        if len(parts) == 1:  # the common case: a pickle and no out-of-band buffer
            part = parts[0]
            size = len(part) if type(part) is bytes else memoryview(part).nbytes
            if limit is None or size < limit:
                chunks += (_HEADER.pack(kind, frame.call_id, len(name), 0), name,
                           _LENGTH.pack(size), part)
                continue
        types = [type(part) for part in parts]
        group_parts = group_parts or lanes.SharedPart in types
        sizes = [len(part) if part_type is bytes else part.nbytes
                 if part_type is lanes.SharedPart else memoryview(part).nbytes
                 for part_type, part in zip(types, parts, strict=True)]
        chunks.append(_HEADER.pack(kind, frame.call_id, len(name), len(parts) - 1))
        chunks.append(name)
        if limit is None or max(sizes) < limit:
            chunks.append(_lengths_format(len(parts)).pack(*sizes))  # every length at once
        else:  # a length of its own for each part, so that a shared one can be flagged
            lengths_at = len(chunks)
            for k, size in enumerate(sizes):
                chunks.append(_LENGTH.pack(size))
                if size >= limit:
                    large.append((lengths_at + k, lengths_at + len(parts) + k))
        chunks.extend(parts)
    if large:
        _share(chunks, large, writer)
    if group_parts:  # a group call's parts that go inline after all
        chunks = [chunk.view() if type(chunk) is lanes.SharedPart else chunk
                  for chunk in chunks]
    return chunks


def _share(chunks: list, large: list[tuple[int, int]], writer: lanes.Writer) -> None:
    """Replaces large parts by references to their copies in shared memory (a group call's
    parts, placed once already, by references to their region), and flags their lengths;
    leaves them inline when no region can be had."""
    placed = [(length_at, part_at) for length_at, part_at in large
              if type(chunks[part_at]) is not lanes.SharedPart]
    references = writer.place([chunks[part_at] for _, part_at in placed]) if placed else []
    if references is None:
        references, large = [], [at for at in large if at not in placed]
    references = iter(references)
    for length_at, part_at in large:
        part = chunks[part_at]
        reference = (writer.hold(part) if type(part) is lanes.SharedPart
                     else next(references))
        chunks[length_at] = _LENGTH.pack(_SHARED | len(reference))
        chunks[part_at] = reference


def decode_message(message: bytes, reader: lanes.Reader | None = None) -> list[Frame]:
    """Splits a received message into frames, without copying inline parts; parts in shared
    memory are copied out through `reader`.

    Raises:
      ValueError: the message is not a well-formed sequence of frames, or refers to shared
        memory that is not there.
    """
    try:
        frames = _decode_frames(memoryview(message), reader)
        if not frames:
            raise ValueError("a message holds at least one frame")
        return frames
    except (struct.error, UnicodeDecodeError, ValueError, KeyError) as e:
        raise ValueError(f"Malformed courier message ({len(message)} bytes): {e}") from e


def _decode_frames(view: memoryview, reader: lanes.Reader | None) -> list[Frame]:
    frames = []
    offset = 0
    end = len(view)
    while offset < end:
        kind, call_id, name_length, buffer_count = _HEADER.unpack_from(view, offset)
        offset += _HEADER_SIZE
        name = str(view[offset:offset + name_length], "utf-8") if name_length else ""
        offset += name_length
        if buffer_count:
            lengths_format = _lengths_format(buffer_count + 1)
            lengths = lengths_format.unpack_from(view, offset)
            offset += lengths_format.size
        else:  # the common case: a pickle and no out-of-band buffer
            lengths = _LENGTH.unpack_from(view, offset)
            offset += _LENGTH_SIZE
        chunks = []
        for length in lengths:
            if length & _SHARED:
                if reader is None:
                    raise ValueError("a part lies in shared memory, which this stream does "
                                     "not use")
                length &= ~_SHARED
                chunks.append(reader.take(view[offset:offset + length]))
            else:
                chunks.append(view[offset:offset + length])
            offset += length
        if offset > end:
            raise ValueError("a frame is longer than the message")
        frames.append(Frame(_KINDS[kind & ~_INVITES_SHARED], call_id, name, chunks[0],
                            chunks[1:], bool(kind & _INVITES_SHARED)))
    return frames


def dumps_call_arguments(method: str, args: tuple, kwargs: dict) -> list:
    """Pickles a call's arguments; on failure names the argument that cannot be pickled."""
    try:
        return dumps((args, kwargs))
    except Exception as e:  # noqa: BLE001 - any pickling failure is reported the same way
        culprit = _find_unpicklable(args, kwargs)
        raise errors.SerializationError(
            f"Cannot pickle {culprit} of call to {method!r}: {type(e).__name__}: {e}") from e


def _find_unpicklable(args: tuple, kwargs: dict) -> str:
    candidates = [(f"positional argument {i}", a) for i, a in enumerate(args)]
    candidates += [(f"keyword argument {k!r}", v) for k, v in kwargs.items()]
    for description, value in candidates:
        try:
            cloudpickle.dumps(value, protocol=5, buffer_callback=lambda _: None)
        except Exception:  # noqa: BLE001
            return f"{description} (of type {type(value).__name__})"
    return "the arguments"


def dumps_exception(exc: BaseException) -> list:
    """Pickles an exception's names and traceback, plus the exception itself when it pickles.

    The exception object is pickled separately, so a client that cannot rebuild it still gets
    its type name, message and traceback.
    """
    try:
        exception_pickle = cloudpickle.dumps(exc, protocol=5)
    except Exception:  # noqa: BLE001 - the exception object itself is not picklable
        exception_pickle = None
    return dumps({
        "type_name": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(exc)),
        "exception_pickle": exception_pickle,
    })


def load_exception(frame: Frame) -> BaseException:
    """Rebuilds a remote exception with the remote traceback as its `__cause__`.

    Falls back to `RemoteError` when the type cannot be rebuilt here (its module is missing, or
    its constructor does not accept its own `args`).
    """
    info = frame.load()
    exc = None
    if info["exception_pickle"] is not None:
        try:
            exc = pickle.loads(info["exception_pickle"])
        except Exception:  # noqa: BLE001 - any failure to rebuild means: use the fallback
            exc = None
    if not isinstance(exc, BaseException):
        exc = errors.RemoteError(info["type_name"], info["message"], info["traceback"])
    exc.__cause__ = errors.RemoteTraceback(info["traceback"])
    return exc
