"""Wire format of courier messages: frames of pickled payloads with out-of-band buffers.

One gRPC message carries one or more frames, so that calls (and results) queued at the same
moment travel together. A frame is::

    header  <B kind><Q call id><H name length><I buffer count>
    name    utf-8 (the method name for a call; empty otherwise)
    lengths <Q> for the pickle, then one <Q> per out-of-band buffer
    pickle  pickle protocol 5 bytes
    buffers the raw bytes of each buffer (numpy array data, bytes-like objects)

The method name travels outside the pickle so a server can refuse an unknown method before it
unpickles anything. Buffers are received as read-only views of the gRPC message: numpy arrays
arrive without a copy and are therefore read-only (`arr.copy()` when you need to write).
Pickling uses cloudpickle, so functions, lambdas and classes defined in `__main__` travel by value.
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

_HEADER = struct.Struct("<BQHI")
_LENGTH = struct.Struct("<Q")


class Kind(enum.IntEnum):
    CALL = 1
    RESULT = 2
    ERROR = 3


_KINDS = {kind.value: kind for kind in Kind}


class Frame:
    """One decoded frame; `payload` and `buffers` are views into the received message."""

    __slots__ = ("kind", "call_id", "name", "payload", "buffers")

    def __init__(self, kind: Kind, call_id: int, name: str, payload: memoryview,
                 buffers: list[memoryview]):
        self.kind = kind
        self.call_id = call_id
        self.name = name
        self.payload = payload
        self.buffers = buffers

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


def encode_frame(kind: Kind, call_id: int, name: str, parts: list) -> list:
    """Returns the byte chunks of one frame; join the chunks of all frames to make a message."""
    name_bytes = name.encode()
    head = [_HEADER.pack(kind, call_id, len(name_bytes), len(parts) - 1), name_bytes]
    head.extend(_LENGTH.pack(memoryview(p).nbytes) for p in parts)
    return head + parts


def decode_message(message: bytes) -> list[Frame]:
    """Splits a received message into frames, without copying payloads.

    Raises:
      ValueError: the message is not a well-formed sequence of frames.
    """
    try:
        return _decode_frames(memoryview(message))
    except (struct.error, UnicodeDecodeError, ValueError, KeyError) as e:
        raise ValueError(f"Malformed courier message ({len(message)} bytes): {e}") from e


def _decode_frames(view: memoryview) -> list[Frame]:
    frames = []
    offset = 0
    while offset < len(view):
        kind, call_id, name_length, buffer_count = _HEADER.unpack_from(view, offset)
        offset += _HEADER.size
        name = bytes(view[offset:offset + name_length]).decode()
        offset += name_length
        lengths_format = _lengths_format(buffer_count + 1)
        lengths = lengths_format.unpack_from(view, offset)
        offset += lengths_format.size
        chunks = []
        for length in lengths:
            chunks.append(view[offset:offset + length])
            offset += length
        if offset > len(view):
            raise ValueError("a frame is longer than the message")
        frames.append(Frame(_KINDS[kind], call_id, name, chunks[0], chunks[1:]))
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
