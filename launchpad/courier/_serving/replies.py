"""The frames a courier server answers with, and how it reads a call's arguments.

A result that cannot be pickled, and arguments that cannot be unpickled, become errors sent
to the caller (SerializationError), never a broken stream.
"""

from __future__ import annotations

import concurrent.futures
import queue
from collections.abc import Iterator
from typing import Any

from launchpad.courier import errors
from launchpad.courier._status import Status
from launchpad.courier._wire import serialization
from launchpad.courier._wire.messages import Messages
from launchpad.courier._wire.serialization import Kind


def load_arguments(frame: serialization.Frame) -> tuple[tuple, dict]:
    try:
        return frame.load()
    except Exception as e:  # noqa: BLE001 - e.g. a class the server cannot import
        raise errors.SerializationError(
            f"Cannot unpickle the arguments of {frame.name!r} on the server: "
            f"{type(e).__name__}: {e}") from e


def replies(outbox: queue.SimpleQueue, count: int,
            messages: Messages, through_lane: bool) -> Iterator[tuple[list, bool]]:
    """Yields `count` replies, as few messages as possible (each the chunks of a message
    holding every reply ready), and whether it is the last. Large parts go through the
    stream's lane (`messages`) when the client invited that (`through_lane`). A None in the
    outbox means the stream was cancelled (in_process.py)."""
    while count:
        frames = outbox.get()
        count -= 1
        while frames is not None and count and not outbox.empty():
            more = outbox.get()
            frames = None if more is None else frames + more
            count -= 1
        if frames is None:
            raise errors.StreamBroken(Status.CANCELLED, "the stream was cancelled")
        yield messages.chunks(frames, through_lane), not count


def pickle_result(method: str, result: Any) -> list:
    """The parts of `method`'s result.

    Raises:
      SerializationError: it cannot be pickled (named: the caller gets this error).
    """
    try:
        return serialization.dumps(result)
    except Exception as e:  # noqa: BLE001 - any pickling failure is reported the same way
        raise errors.SerializationError(
            f"Cannot pickle the result of {method!r} (of type {type(result).__name__}): "
            f"{e}") from e


def result_frame(call_id: int, method: str, result: Any) -> list[serialization.OutFrame]:
    try:
        parts = pickle_result(method, result)
    except errors.SerializationError as e:  # reported to the caller
        return error_frame(call_id, e)
    return [serialization.encode_frame(Kind.RESULT, call_id, "", parts)]


def future_frame(call_id: int, method: str,
                 future: concurrent.futures.Future) -> list[serialization.OutFrame]:
    try:
        result = future_result(method, future)
    except BaseException as e:  # noqa: BLE001 - the method's failure, to its caller
        return error_frame(call_id, e)
    return result_frame(call_id, method, result)


def future_result(method: str, future: concurrent.futures.Future) -> Any:
    """What the future a method answered with comes to (waiting for it); raises its
    exception, or a CancelledError that names the method."""
    if future.cancelled():
        raise concurrent.futures.CancelledError(f"{method!r} was cancelled on the server")
    exc = future.exception()
    if exc is not None:
        raise exc
    return future.result()


def error_frame(call_id: int, exc: BaseException) -> list[serialization.OutFrame]:
    return [serialization.encode_frame(Kind.ERROR, call_id, "",
                                       serialization.dumps_exception(exc))]
