"""The courier client: calls methods of a remote courier server as if they were local.

    client.method(*args)            blocks for the result (or raises the remote exception)
    client.futures.method(*args)    returns a concurrent.futures.Future at once
    client(*args)                   calls the remote object's __call__

A client connects lazily, on its first call, and reconnects by itself after the connection is
lost: calls in flight when a server dies fail with `ServerUnavailableError`, later calls go to
the server at its (re-resolved) address. Every wait is bounded: connecting by
`connect_timeout`, each call by `call_timeout` when set. A client pickles with all its options.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import heapq
import itertools
import queue
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any, Protocol, Union

import grpc

from launchpad.courier import errors, serialization, transport
from launchpad.courier.serialization import Kind
from launchpad.courier.server import LIST_METHODS

Timeout = Union[None, int, float, datetime.timedelta]


class AddressResolver(Protocol):
    """Finds a server's address at connect time (e.g. by asking a program's controller)."""

    def resolve(self, timeout: float) -> str:
        ...


def _seconds(value: Timeout, name: str) -> float | None:
    """Normalises a timeout given as seconds or timedelta; 0 and None mean no timeout."""
    if value is None:
        return None
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be seconds (int/float) or a timedelta, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return float(value) or None


class Client:
    """A client of one courier server.

    Args:
      address: 'host:port', or an `AddressResolver` asked on every (re)connect.
      token: the server's secret token.
      call_timeout: seconds (or timedelta) a call may take; 0/None waits as long as it takes.
      wait_for_ready: wait up to `connect_timeout` for an unreachable server to come up;
        False fails at once.
      connect_timeout: seconds to wait for the server to be reachable before the calls waiting
        for it fail with `ServerUnavailableError`.
      compress: gzip messages on the wire.
    """

    def __init__(self, address: str | AddressResolver, *, token: str = "",
                 call_timeout: Timeout = None, wait_for_ready: bool = True,
                 connect_timeout: Timeout = 30.0, compress: bool = False):
        if not isinstance(address, str) and not hasattr(address, "resolve"):
            raise TypeError(f"address must be 'host:port' or a resolver, got {address!r}")
        self._address = address
        self._token = token
        self._call_timeout = _seconds(call_timeout, "call_timeout")
        self._wait_for_ready = wait_for_ready
        self._connect_timeout = _seconds(connect_timeout, "connect_timeout")
        self._compress = compress
        self._slot = _ConnectionSlot()
        self._deadlines = _DeadlineWatcher()
        # Dropping a client without close() must not leave its threads and stream behind.
        weakref.finalize(self, self._slot.close, "the client was garbage collected")
        weakref.finalize(self, self._deadlines.close)
        self.futures = _FuturesView(self)

    @property
    def address(self) -> str:
        """The address given, or the last one resolved."""
        if isinstance(self._address, str):
            return self._address
        connection = self._slot.connection
        return connection.address if connection and connection.address else repr(self._address)

    def __reduce__(self):
        return (_rebuild_client, (self._address, {
            "token": self._token, "call_timeout": self._call_timeout,
            "wait_for_ready": self._wait_for_ready, "connect_timeout": self._connect_timeout,
            "compress": self._compress}))

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args, **kwargs: self.call(name, *args, **kwargs)

    def __call__(self, *args, **kwargs) -> Any:
        return self.call("__call__", *args, **kwargs)

    def call(self, method: str, /, *args, **kwargs) -> Any:
        """Calls `method` on the server and waits for its result."""
        future = self._start(method, args, kwargs)
        if self._call_timeout is None:
            return future.result()
        # Waiting on the future (not catching TimeoutError from result()) keeps a call that
        # failed with a TimeoutError of its own apart from this call's deadline passing.
        if not concurrent.futures.wait([future], timeout=self._call_timeout).done:
            error = self._timed_out(method)
            _settle(future, exception=error)  # a late reply is dropped
            raise error
        return future.result()

    def submit(self, method: str, /, *args, **kwargs) -> concurrent.futures.Future:
        """Starts a call of `method` and returns its future at once.

        With a `call_timeout`, the future fails with `CallTimeoutError` when it expires.
        `future.cancel()` works until the reply arrives (the server still runs the call).
        """
        future = self._start(method, args, kwargs)
        if self._call_timeout is not None:
            self._deadlines.watch(future, self._call_timeout, lambda: self._timed_out(method))
        return future

    def close(self) -> None:
        """Closes the connection; calls in flight fail. Safe to call more than once."""
        self._slot.close(f"the client of {self.address} was closed")
        self._deadlines.close()

    def _start(self, method: str, args: tuple, kwargs: dict) -> concurrent.futures.Future:
        parts = serialization.dumps_call_arguments(method, args, kwargs)
        future: concurrent.futures.Future = concurrent.futures.Future()
        while not self._slot.get(self._open_connection).send(method, parts, future):
            pass  # the connection broke between get and send: the next get opens a new one
        return future

    def _open_connection(self) -> "_Connection":
        return _Connection(self._address, self._token, self._wait_for_ready,
                           self._connect_timeout, self._compress)

    def _timed_out(self, method: str) -> errors.CallTimeoutError:
        return errors.CallTimeoutError(
            f"Call to {method!r} on {self.address} did not complete within "
            f"call_timeout={self._call_timeout}s")


def _rebuild_client(address, options):
    return Client(address, **options)


class _FuturesView:
    """`client.futures.method(...)` returns a Future instead of blocking."""

    def __init__(self, client: Client):
        self._client = weakref.proxy(client)

    def __getattr__(self, name: str) -> Callable[..., concurrent.futures.Future]:
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args, **kwargs: self._client.submit(name, *args, **kwargs)

    def __call__(self, *args, **kwargs) -> concurrent.futures.Future:
        return self._client.submit("__call__", *args, **kwargs)


def list_methods(client: Client) -> list[str]:
    """Returns the names of the methods the client's server serves."""
    return client.call(LIST_METHODS)


class _ConnectionSlot:
    """Holds a client's current connection; replaces it when broken; closes it once."""

    def __init__(self):
        self.connection: _Connection | None = None
        self._lock = threading.Lock()
        self._closed_because: str | None = None

    def get(self, open_connection: Callable[[], "_Connection"]) -> "_Connection":
        with self._lock:
            if self._closed_because is not None:
                raise errors.ClientClosedError(
                    f"Courier client is closed: {self._closed_because}")
            if self.connection is None or self.connection.broken:
                self.connection = open_connection()
            return self.connection

    def close(self, why: str) -> None:
        with self._lock:
            if self._closed_because is None:
                self._closed_because = why
            connection, self.connection = self.connection, None
        if connection is not None:
            connection.close(errors.ClientClosedError(why))


class _Connection:
    """One gRPC channel to one server, and the streams open on it.

    A connection thread resolves the address and waits (bounded) for the server; calls made
    meanwhile wait in `_early` and then travel together. A call is sent on a stream only when
    the stream is idle, or filling (its message not yet handed to gRPC), never while calls sent
    on it before are unanswered: that is what lets the server run each call on the stream's
    own thread. Concurrent calls therefore open more streams; calls made together share one
    message. When a stream fails, the connection is `broken`: its calls fail, and the client
    opens a new connection (resolving the address again) for later calls.
    """

    _ids = itertools.count(1)

    def __init__(self, address, token, wait_for_ready, connect_timeout, compress):
        self.address = address if isinstance(address, str) else ""
        self.broken = False
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
            self.broken = True
            early, self._early = self._early or [], None
            streams = list(self._streams)
        for _, _, future in early:
            _settle(future, exception=error)
        for stream in streams:
            stream.close(error)
        if self._channel is not None:
            self._channel.close()

    def _connect(self) -> None:
        try:
            timeout = self._connect_timeout if self._wait_for_ready else 0.0
            if not isinstance(self._target, str):
                self.address = self._target.resolve(timeout if timeout is not None else 1e9)
            self._channel = transport.open_channel(self.address, self._compress)
            if self._wait_for_ready and timeout is not None:
                if not transport.wait_until_ready(self._channel, timeout):
                    raise errors.ServerUnavailableError(
                        f"Courier server at {self.address} was not reachable within "
                        f"connect_timeout={timeout}s")
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

    def _open_stream(self) -> "_Stream":
        stream = _Stream(self)
        self._streams.add(stream)
        stream.start(transport.open_stream(
            self._channel, stream.requests(), self._token, self._wait_for_ready))
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

    def __init__(self, connection: _Connection):
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
            _settle(future, exception=error)
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
                    _settle(future, result=frame.load())
                else:
                    _settle(future, exception=serialization.load_exception(frame))
            except Exception as e:  # noqa: BLE001 - e.g. the result's class is unknown here
                _settle(future, exception=errors.SerializationError(
                    f"Cannot unpickle a reply from {self._connection.address}: "
                    f"{type(e).__name__}: {e}"))


def _settle(future: concurrent.futures.Future, result: Any = None,
            exception: BaseException | None = None) -> None:
    """Completes a future unless the caller already cancelled it or it timed out."""
    try:
        if exception is not None:
            future.set_exception(exception)
        else:
            future.set_result(result)
    except concurrent.futures.InvalidStateError:
        pass


class _DeadlineWatcher:
    """Fails futures that outlive their call_timeout; one thread per client, started lazily."""

    def __init__(self):
        self._heap: list = []
        self._condition = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._order = itertools.count()

    def watch(self, future, seconds: float, make_error: Callable[[], Exception]) -> None:
        deadline = time.monotonic() + seconds
        with self._condition:
            if self._closed:
                return
            heapq.heappush(self._heap, (deadline, next(self._order), future, make_error))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="courier-deadlines",
                                                daemon=True)
                self._thread.start()
            self._condition.notify()

    def close(self) -> None:
        with self._condition:
            self._closed = True
            self._condition.notify()

    def _run(self) -> None:
        with self._condition:
            while not self._closed:
                while self._heap and self._heap[0][2].done():
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._condition.wait()
                    continue
                deadline, _, future, make_error = self._heap[0]
                remaining = deadline - time.monotonic()
                if remaining > 0:
                    self._condition.wait(remaining)
                    continue
                heapq.heappop(self._heap)
                _settle(future, exception=make_error())

