"""A client's connection to one courier server: one gRPC channel and a pool of streams.

A connection thread resolves the address and waits (bounded) for the server; calls made
meanwhile wait and then travel together. A call is sent on a stream only when the stream is
idle, or filling (its message not yet handed to gRPC), never while calls sent on it before are
unanswered: that is what lets the server run each call on the stream's own thread (see
server.py). Concurrent calls therefore open more streams; calls made together share one
message. Each stream has a reader thread that sets its calls' futures. When a stream fails,
the connection is `broken`: its calls fail, and the client opens a new connection (resolving
the address again) for later calls.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc

from launchpad.courier import errors, serialization, transport
from launchpad.courier.serialization import Kind

# While a resolved address does not answer, it is resolved again this often.
_RESOLVE_AGAIN_SECS = 0.5


class Connection:
    """One gRPC channel to one server, and the streams open on it (see the module doc)."""

    _ids = itertools.count(1)

    def __init__(self, address, token, wait_for_ready, connect_timeout, compress):
        self.address = address if isinstance(address, str) else ""
        self.broken = False
        self.error: Exception | None = None  # why it broke
        self._target = address
        self._token = token
        self._wait_for_ready = wait_for_ready
        self._connect_timeout = connect_timeout
        self._compress = compress
        self._lock = threading.Lock()
        self._channel = None
        self._early: list | None = []  # calls made before the server was reached
        self._filling: _Stream | None = None
        self._idle: list[_Stream] = []
        self._streams: set[_Stream] = set()
        threading.Thread(target=self._connect, name="courier-connect", daemon=True).start()

    def send(self, method: str, parts: list, future: concurrent.futures.Future) -> bool:
        """Sends a call; False if the connection broke meanwhile (the caller retries)."""
        call_id = next(self._ids)
        frame = serialization.encode_frame(Kind.CALL, call_id, method, parts)
        with self._lock:
            if self.broken:
                return False
            if self._early is not None:
                self._early.append((call_id, frame, future))
                return True
            stream = self._filling
            if stream is None:
                stream = self._idle.pop() if self._idle else self._open_stream()
                self._filling = stream
            stream.pending[call_id] = future
        stream.outbox.put(frame)
        return True

    def close(self, error: Exception) -> None:
        with self._lock:
            if not self.broken:
                self.error = error
            self.broken = True
            early, self._early = self._early or [], None
            streams = list(self._streams)
        for _, _, future in early:
            settle(future, exception=error)
        for stream in streams:
            stream.close(error)
        if self._channel is not None:
            self._channel.close()

    def _connect(self) -> None:
        try:
            self._channel = self._open_channel()
        except Exception as e:  # noqa: BLE001 - e.g. a resolver failed: report, do not hang
            self.close(e)
            return
        with self._lock:
            early, self._early = self._early, None
            if self.broken or not early:
                return
            stream = self._open_stream()  # the early calls travel together
            for call_id, _, future in early:
                stream.pending[call_id] = future
        stream.outbox.put([chunk for _, frame, _ in early for chunk in frame])

    def _open_channel(self) -> grpc.Channel:
        """A channel to the server, connected unless wait_for_ready is off (then calls fail
        at once if the server is not there). A resolved address is resolved again while the
        server cannot be reached: its node may have moved (restarted) or ended (the resolver
        then raises, and that error is the calls' error)."""
        if not self._wait_for_ready:
            if not isinstance(self._target, str):
                self.address = self._target.resolve(0.0)
            return transport.open_channel(self.address, self._compress)
        timeout = self._connect_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        channel, channel_address = None, None
        try:
            while True:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not isinstance(self._target, str):
                    self.address = self._target.resolve(1e9 if remaining is None else remaining)
                if channel_address != self.address:  # a channel keeps trying its address
                    if channel is not None:
                        channel.close()
                    channel = transport.open_channel(self.address, self._compress)
                    channel_address = self.address
                attempt = _RESOLVE_AGAIN_SECS if remaining is None else remaining
                if not isinstance(self._target, str):
                    attempt = min(attempt, _RESOLVE_AGAIN_SECS)
                if transport.wait_until_ready(channel, attempt):
                    ready, channel = channel, None
                    return ready
                if deadline is not None and time.monotonic() >= deadline:
                    raise errors.ServerUnavailableError(
                        f"Courier server at {self.address} was not reachable within "
                        f"connect_timeout={timeout}s")
        finally:
            if channel is not None:
                channel.close()

    def _open_stream(self) -> "_Stream":
        stream = _Stream(self)
        self._streams.add(stream)
        stream.start(transport.open_stream(self._channel, stream.requests(), self._token))
        return stream

    def sealed(self, stream: "_Stream") -> None:
        """The stream's message went to gRPC: later calls must go elsewhere (lock held)."""
        if self._filling is stream:
            self._filling = None

    def answered(self, stream: "_Stream") -> None:
        """Every call sent on the stream is answered: it can take calls again (lock held)."""
        if not self.broken:
            self._idle.append(stream)

    def stream_failed(self, stream: "_Stream", error: Exception) -> None:
        self.close(error)


class _Stream:
    """One gRPC stream of a connection: a queue of outgoing frames, a reader of replies."""

    def __init__(self, connection: Connection):
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        self.pending: dict[int, concurrent.futures.Future] = {}
        self._connection = connection
        self._lock = connection._lock
        self._responses = None

    def start(self, responses) -> None:
        self._responses = responses
        threading.Thread(target=self._read, name="courier-client", daemon=True).start()

    def requests(self) -> Iterator[bytes]:
        """Yields one message per wake-up: every frame queued by then (the stream's calls)."""
        while True:
            chunks = self.outbox.get()
            if chunks is None:
                return
            with self._lock:
                while not self.outbox.empty():
                    more = self.outbox.get()
                    if more is None:
                        return
                    chunks = chunks + more
                self._connection.sealed(self)
            yield b"".join(chunks)

    def close(self, error: Exception) -> None:
        with self._lock:
            pending, self.pending = self.pending, {}
        for future in pending.values():
            settle(future, exception=error)
        self.outbox.put(None)
        if self._responses is not None:
            self._responses.cancel()

    def _read(self) -> None:
        address = self._connection.address
        try:
            for message in self._responses:
                self._deliver(message)
            error: Exception = errors.ServerUnavailableError(
                f"Courier server at {address} closed the connection")
        except grpc.RpcError as e:
            error = transport.error_for_broken_stream(e, address)
        except Exception as e:  # noqa: BLE001 - a malformed reply: fail, do not hang
            error = e
        self._connection.stream_failed(self, error)

    def _deliver(self, message: bytes) -> None:
        frames = serialization.decode_message(message)
        with self._lock:
            futures = [self.pending.pop(frame.call_id, None) for frame in frames]
            if not self.pending:
                self._connection.answered(self)
        for frame, future in zip(frames, futures, strict=True):
            if future is None or future.done():
                continue  # cancelled or timed out by the caller meanwhile
            try:
                if frame.kind == Kind.RESULT:
                    settle(future, result=frame.load())
                else:
                    settle(future, exception=serialization.load_exception(frame))
            except Exception as e:  # noqa: BLE001 - e.g. the result's class is unknown here
                settle(future, exception=errors.SerializationError(
                    f"Cannot unpickle a reply from {self._connection.address}: "
                    f"{type(e).__name__}: {e}"))


def settle(future: concurrent.futures.Future, result: Any = None,
            exception: BaseException | None = None) -> None:
    """Completes a future unless the caller already cancelled it or it timed out."""
    try:
        if exception is not None:
            future.set_exception(exception)
        else:
            future.set_result(result)
    except concurrent.futures.InvalidStateError:
        pass
