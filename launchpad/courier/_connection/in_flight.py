"""What a client's connection keeps of its calls in flight (connection.py): its streams,
each with the calls sent on it and not yet answered (`PooledStream`); a call that a thread
sent and whose reply it reads itself (`StartedCall`); what a blocking call comes to, lighter
than a Future (`BlockingCall`); and how a call's future is settled (`settle`), once,
whoever comes first: the reply, a deadline, the connection's end.

A thread with many started calls waits on all their sockets at once (`read_replies`, one
`epoll`), reading each reply as it comes: a group call to 64 members wakes no stream thread.
"""

from __future__ import annotations

import concurrent.futures
import enum
import itertools
import queue
import selectors
import threading
import time
from typing import Any, Protocol

from launchpad.courier import errors
from launchpad.courier._wire import serialization, streams


class After(enum.Enum):
    """What a stream's driver does after a reply was delivered."""

    RECEIVE = 1  # calls on the stream are still unanswered
    LEAVE = 2  # the stream is idle again, and may already be driven by another thread
    FINISH = 3  # the connection closed meanwhile: the driver ends the stream


class PooledStream:
    """A transport stream, the calls sent on it and not yet answered, and, for queued
    calls, the frames waiting to be sent and the thread that sends them."""

    __slots__ = ("transport", "pending", "outbox", "abandoned", "_thread")

    def __init__(self, stream: streams.ClientStream):
        self.transport = stream
        self.pending: dict[int, concurrent.futures.Future] = {}
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        self.abandoned = False  # a driven call gave up waiting: the stream is not reused
        self._thread: threading.Thread | None = None

    def chunks(self, frames: list[serialization.OutFrame]) -> list:
        """The frames as one message's chunks on this stream (through its lane, whose region
        is reused: every reply to the last message came, so the server has read it)."""
        messages = self.transport.messages
        messages.peer_read_all()
        return messages.chunks(frames)

    def hand_over(self, frames: list[serialization.OutFrame], other: PooledStream) -> None:
        """Moves queued calls, not sent yet, to `other`'s queue (connection lock held)."""
        for frame in frames:
            other.pending[frame.call_id] = self.pending.pop(frame.call_id)
        other.outbox.put(frames)

    def let_go(self) -> None:
        """Ends the stream, no longer idle nor in use (found dead, or its call given up), and
        its thread if it has one (its connection's lock not held: nobody else touches it)."""
        self.outbox.put(None)
        self.transport.finish()

    def start_thread(self, serve_queue) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=serve_queue, args=(self,),
                                            name="courier-client", daemon=True)
            self._thread.start()


class RepliesReader(Protocol):
    """What reads a started call's reply and gives it up (connection.Connection does): the
    call knows its connection by this alone, so this module imports none of it."""

    def read_reply(self, stream: PooledStream) -> bool: ...

    def give_up(self, stream: PooledStream, call_id: int) -> None: ...


class StartedCall:
    """A call sent by a thread that reads its reply itself (Connection.start): when
    `fileno()` is readable, `read_reply()` settles its future. `done` once it is settled
    or given up."""

    __slots__ = ("future", "done", "_connection", "_stream", "_call_id")

    def __init__(self, connection: RepliesReader, stream: PooledStream, call_id: int,
                 future: concurrent.futures.Future):
        self.future = future
        self.done = False
        self._connection = connection
        self._stream = stream
        self._call_id = call_id

    def fileno(self) -> int:
        return self._stream.transport.fileno()

    def read_reply(self) -> bool:
        """Reads the reply, or the stream's end, which fails the call; False (not `done`)
        if the reply has not begun to come."""
        self.done = self._connection.read_reply(self._stream)
        return self.done

    def give_up(self, error: BaseException | None = None) -> None:
        """Stops waiting: the stream is ended (its server may still run the call), and the
        future, unless settled already, fails with `error` if one is given."""
        self._connection.give_up(self._stream, self._call_id)
        if error is not None:
            settle(self.future, exception=error)
        self.done = True


def read_replies(calls: list[StartedCall], deadline: float | None) -> None:
    """Reads each started call's reply as it comes, until all are in or `deadline` (of
    time.monotonic()) has passed; the calls not in by then are given up, their futures left
    for the caller to time out. Interrupted (e.g. KeyboardInterrupt), it gives up every call
    not in, failing it, and raises."""
    waiting = [call for call in calls if not call.done]
    if not waiting:
        return
    with selectors.DefaultSelector() as selector:
        try:
            for call in waiting:
                selector.register(call.fileno(), selectors.EVENT_READ, call)
            left = len(waiting)
            while left:
                timeout = None if deadline is None else deadline - time.monotonic()
                if timeout is not None and timeout <= 0:
                    break
                for key, _ in selector.select(timeout):
                    selector.unregister(key.fd)  # first: the read may close the socket
                    if key.data.read_reply():
                        left -= 1
                    else:  # only the answer to a new stream's hello had come
                        selector.register(key.fd, selectors.EVENT_READ, key.data)
        except BaseException as e:
            for call in waiting:
                if not call.done:
                    call.give_up(errors.ServerUnavailableError(
                        f"A group call was interrupted: {type(e).__name__}"))
            raise
    for call in waiting:
        if not call.done:
            call.give_up()


class BlockingCall:
    """What a blocking call without a deadline comes to (Client.call): the part of a Future
    that its connection and its caller use (`set_result`, `set_exception`, `done`,
    `result`), for a lock instead of a Future's Condition and RLock (2-3 us of a call's
    client CPU). The first to settle it wins; a later one raises InvalidStateError, as on a
    Future."""

    __slots__ = ("_unsettled", "_claims", "_done", "_result", "_exception")

    def __init__(self):
        self._unsettled = threading.Lock()  # held until settled
        self._unsettled.acquire()
        self._claims = itertools.count()  # (next() is atomic: one settler gets 0)
        self._done = False
        self._result: Any = None
        self._exception: BaseException | None = None

    def set_result(self, result: Any) -> None:
        self._settle(result, None)

    def set_exception(self, exception: BaseException) -> None:
        self._settle(None, exception)

    def done(self) -> bool:
        return self._done

    def result(self) -> Any:
        """The call's result (waiting for it), or raises its exception."""
        if not self._done:
            self._unsettled.acquire()
            self._unsettled.release()
        if self._exception is None:
            return self._result
        try:
            raise self._exception
        finally:
            self = None  # (the traceback holds this frame: no cycle through it)

    def _settle(self, result: Any, exception: BaseException | None) -> None:
        if next(self._claims):
            raise concurrent.futures.InvalidStateError("the call is settled already")
        self._result, self._exception = result, exception
        self._done = True
        self._unsettled.release()


# What a call's outcome is kept in: a Future, or a blocking call's lighter stand-in.
Settleable = concurrent.futures.Future | BlockingCall


def settle(future: Settleable, result: Any = None,
           exception: BaseException | None = None) -> None:
    """Completes a future unless the caller already cancelled it or it timed out."""
    try:
        if exception is not None:
            future.set_exception(exception)
        else:
            future.set_result(result)
    except concurrent.futures.InvalidStateError:
        pass


def settle_replies(frames: list[serialization.Frame], futures: list, address: str) -> None:
    """Settles each call's future (None: no longer awaited) with its reply frame's result or
    exception; a reply that cannot be unpickled here fails its call, not the connection."""
    for frame, future in zip(frames, futures, strict=True):
        if future is None or future.done():
            continue  # cancelled or timed out by the caller meanwhile
        try:
            if frame.kind == serialization.Kind.RESULT:
                settle(future, result=frame.load())
            else:
                settle(future, exception=serialization.load_exception(frame))
        except Exception as e:  # noqa: BLE001 - e.g. the result's class is unknown here
            settle(future, exception=errors.SerializationError(
                f"Cannot unpickle a reply from {address}: {type(e).__name__}: {e}"))
