"""The courier server: serves every public method of one Python object over gRPC.

Each client stream is served by its own gRPC thread, which runs the calls it reads itself::

    read a message -> run all its calls but the last on workers -> run the last one here
                   -> yield the replies (coalesced) -> read the next message

Running a call on the thread that read it costs no thread hand-off, and is safe because a
client sends a message on a stream only when every call it sent there before has been
answered (see client.py): a call that blocks holds up no other call. At most
`thread_pool_size` calls run at once, however many streams are open.

A method that returns a `concurrent.futures.Future` (a batched handler does) is answered when
the future completes, without holding a call slot meanwhile. A server can start before its
object exists (`Server(None)` then `serve(obj)`): calls that arrive early wait for it, so a node
can publish its address before it builds the object that answers.

A client on this host may send large parts through shared memory (the stream's lane, see
shared_memory.py), and invite replies the same way. The lane's region for replies is reused
from its start when the next message arrives: the client sends it only after reading every
reply to the one before.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextvars
import hmac
import inspect
import queue
import threading
from collections.abc import Iterator
from typing import Any

import grpc
from absl import logging

from launchpad.courier import errors, serialization, shared_memory, transport
from launchpad.courier.serialization import Kind
from launchpad.courier.threads import DaemonThreadPool
from launchpad.courier.tls import TLS

LIST_METHODS = "__list_methods__"
_MAX_WORKERS = 4096
# After its streams are cancelled, how long stop() waits for their threads to let go of what
# they hold (shared memory); a thread still running a call past the grace lets go when it ends.
_STREAMS_END_SECS = 1.0


def public_methods(obj: Any) -> list[str]:
    """Names a courier server serves for `obj`: public callables, and `__call__` if defined."""
    names = [n for n in dir(obj) if not n.startswith("_") and _is_method(obj, n)]
    if callable(obj) and not isinstance(obj, type):
        names.append("__call__")
    return sorted(names)


def _is_method(obj: Any, name: str) -> bool:
    # getattr_static does not run properties, so listing methods has no side effects.
    attr = inspect.getattr_static(obj, name, None)
    if isinstance(attr, (staticmethod, classmethod)):
        return True
    return callable(attr) and not isinstance(attr, property)


class Server:
    """Serves `obj`'s public methods to courier clients.

    Args:
      obj: the object to serve, or None to start serving before it exists (see `serve`).
      port: the port to bind; 0 lets the operating system pick a free one (no race).
      host: the interface to bind; loopback by default.
      token: the secret every stream must carry; empty disables the check.
      thread_pool_size: how many calls run at once.
      tls: serve over TLS only, to clients with a certificate of its CA (see tls.py); None
        serves plaintext.
    """

    def __init__(self, obj: Any = None, *, port: int = 0, host: str = "127.0.0.1",
                 token: str = "", thread_pool_size: int = 16, tls: TLS | None = None):
        if thread_pool_size < 1:
            raise ValueError(f"thread_pool_size must be >= 1, got {thread_pool_size}")
        self._host = host
        self._port = port
        self._token = token
        self._tls = tls
        self._obj = obj
        self._ready = threading.Event()
        if obj is not None:
            self._ready.set()
        self._stopped = threading.Event()
        self._stop_lock = threading.Lock()
        # Calls received and not yet answered, and the outboxes of open streams: stop() lets
        # the first drain and then ends the second, so no accepted call loses its reply.
        self._in_flight = 0
        self._unanswered: collections.Counter[str] = collections.Counter()  # method -> calls
        self._drained = threading.Condition()
        # Open streams -> whether their thread waits for the next message (all replied).
        self._streams: dict[grpc.ServicerContext, bool] = {}
        self._grpc_server: transport.GrpcServer | None = None
        self._workers: DaemonThreadPool | None = None
        # Tokens of the calls that may run at once (a C-level queue: cheap on the hot path).
        self._call_slots: queue.SimpleQueue = queue.SimpleQueue()
        for _ in range(thread_pool_size):
            self._call_slots.put(None)
        self._context = contextvars.copy_context()
        self._address = ""

    @property
    def address(self) -> str:
        """host:port of the running server; empty before `start()`."""
        return self._address

    @property
    def port(self) -> int:
        return int(self._address.rsplit(":", 1)[1]) if self._address else 0

    def start(self) -> str:
        """Binds and starts serving; returns the bound address ('host:port')."""
        if self._grpc_server is not None:
            raise RuntimeError(f"Courier server at {self._address} is already started")
        # Handlers run in the context of the thread that started the server, so code served by
        # a node sees that node's context (who am I, my program) on every handler thread.
        self._context = contextvars.copy_context()
        # Runs the calls of a message but its last; calls running at once are bounded by
        # _call_slots, not by the number of workers.
        self._workers = DaemonThreadPool(_MAX_WORKERS, thread_name_prefix="courier-worker")
        self._grpc_server = transport.start_server(self._stream, self._host, self._port,
                                                    self._tls)
        host = f"[{self._host}]" if ":" in self._host else self._host
        self._address = f"{host}:{self._grpc_server.port}"
        return self._address

    def serve(self, obj: Any) -> None:
        """Sets the object to serve; calls waiting for it proceed."""
        if obj is None:
            raise ValueError("Cannot serve None")
        self._obj = obj
        self._ready.set()

    def stop(self, grace: float = 5.0) -> None:
        """Stops serving, gracefully: new calls are refused, calls already received get up to
        `grace` seconds to finish and send their replies, then every stream is closed.
        Safe to call more than once; returns once the server has stopped and its streams
        have ended (or, for a stream still running a call, after one more second)."""
        with self._stop_lock:
            if self._stopped.is_set() and self._grpc_server is None:
                return
            self._stopped.set()
            self._ready.set()  # calls waiting for an object to serve fail now
            with self._drained:
                if not self._drained.wait_for(self._quiet, timeout=grace):
                    self._warn_unanswered(grace)
                streams = list(self._streams)
            for stream in streams:
                stream.cancel()  # idle: its thread waits for a message that will not come
            if self._grpc_server is not None:
                self._grpc_server.stop(grace=None)
                self._grpc_server = None
            with self._drained:
                self._drained.wait_for(lambda: not self._streams, timeout=_STREAMS_END_SECS)
            if self._workers is not None:
                self._workers.shutdown(wait=False, cancel_futures=True)

    def _warn_unanswered(self, grace: float) -> None:
        """Names the calls still running after the grace period (lock held). Their threads
        are left to them and end with their call, or with the process (see threads.py)."""
        running = ", ".join(name if count == 1 else f"{name} (x{count})"
                            for name, count in sorted(self._unanswered.items()))
        logging.warning("Courier server at %s stopped with %d call(s) unanswered after %gs "
                        "(%s); they are left to finish and do not keep the process alive",
                        self._address, self._in_flight, grace,
                        f"still running: {running}" if running else "replies not yet sent")

    def _quiet(self) -> bool:
        """Every call received has been answered and every reply sent (lock held)."""
        return self._in_flight == 0 and all(self._streams.values())

    def __enter__(self) -> "Server":
        if self._grpc_server is None:
            self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _stream(self, requests: Iterator[bytes], context: grpc.ServicerContext):
        if self._token and not hmac.compare_digest(transport.token_of(context), self._token):
            transport.refuse(context)
        return self._serve_stream(requests, context, transport.accept_shared_memory(context))

    def _serve_stream(self, requests: Iterator[bytes], context: grpc.ServicerContext,
                      lane: shared_memory.Lane | None) -> Iterator[bytes]:
        outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._set_waiting(context, True)
        try:
            for message in requests:
                self._set_waiting(context, False)
                try:
                    frames = serialization.decode_message(message, lane.reader if lane else None)
                except ValueError as e:  # A malformed message: drop this stream only.
                    logging.warning("Courier server at %s dropped a malformed stream: %s",
                                    self._address, e)
                    return
                reply_lane = None
                if lane is not None:
                    lane.writer.reset()  # the client read every reply to its last message
                    if frames[0].invites_shared_memory:
                        reply_lane = lane
                self._start_calls(frames, outbox)
                yield from _replies(outbox, len(frames), reply_lane)
                self._set_waiting(context, True)
        except grpc.RpcError as e:
            # The client went away or the server is stopping. grpc keeps the error in the
            # stream's state, which its traceback's frames hold in turn: a cycle that would
            # keep this frame's last message (and its arrays) alive until the collector runs.
            e.__traceback__ = None
            return
        finally:
            if lane is not None:
                lane.close()
            with self._drained:
                self._streams.pop(context, None)
                self._drained.notify_all()

    def _set_waiting(self, context: grpc.ServicerContext, waiting: bool) -> None:
        self._streams[context] = waiting  # one dict store: atomic, no lock on the hot path
        if waiting and self._stopped.is_set():
            with self._drained:  # stop() waits for every stream to be waiting
                self._drained.notify_all()

    def _start_calls(self, frames: list, outbox: queue.SimpleQueue) -> None:
        """Runs a message's calls: all but the last on workers, the last on this thread."""
        with self._drained:
            accepted = not self._stopped.is_set()
            if accepted:
                self._in_flight += len(frames)
                self._unanswered.update(frame.name for frame in frames)
        if not accepted:
            for frame in frames:
                outbox.put(_error_frame(frame.call_id, errors.ServerUnavailableError(
                    f"Courier server at {self._address} is stopping; {frame.name!r} was not "
                    "run")))
            return
        *others, last = frames
        for frame in others:
            self._workers.submit(self._run, frame, outbox)
        self._run(last, outbox)

    def _run(self, frame: serialization.Frame, outbox: queue.SimpleQueue) -> None:
        token = self._call_slots.get()
        try:
            self._context.copy().run(self._handle, frame, outbox)
        finally:
            self._call_slots.put(token)

    def _handle(self, frame: serialization.Frame, outbox: queue.SimpleQueue) -> None:
        name = frame.name
        try:
            self._ready.wait()
            if self._obj is None:
                raise errors.ServerUnavailableError(
                    f"Courier server at {self._address} stopped before serving {name!r}")
            method = self._method(name)
            args, kwargs = _load_arguments(frame)
            # A batched handler answers with a Future: the reply is sent when it completes.
            method = getattr(method, "__courier_submit__", method)
            result = method(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - every failure goes back to the caller
            self._reply(outbox, name, _error_frame(frame.call_id, e))
            return
        if isinstance(result, concurrent.futures.Future):
            result.add_done_callback(
                lambda f: self._reply(outbox, name, _future_frame(frame.call_id, name, f)))
        else:
            self._reply(outbox, name, _result_frame(frame.call_id, name, result))

    def _reply(self, outbox: queue.SimpleQueue, method: str, frames: list) -> None:
        outbox.put(frames)
        with self._drained:
            self._in_flight -= 1
            left = self._unanswered[method] - 1
            if left:
                self._unanswered[method] = left
            else:
                del self._unanswered[method]
            if self._in_flight == 0:
                self._drained.notify_all()

    def _method(self, name: str):
        if name == LIST_METHODS:
            return lambda: public_methods(self._obj)
        method = None
        if not name.startswith("_") or name == "__call__":
            method = getattr(self._obj, name, None)
        if not callable(method):
            raise errors.UnknownMethodError(name, public_methods(self._obj), self._address)
        return method


def _load_arguments(frame: serialization.Frame) -> tuple[tuple, dict]:
    try:
        return frame.load()
    except Exception as e:  # noqa: BLE001 - e.g. a class the server cannot import
        raise errors.SerializationError(
            f"Cannot unpickle the arguments of {frame.name!r} on the server: "
            f"{type(e).__name__}: {e}") from e


def _replies(outbox: queue.SimpleQueue, count: int,
             lane: shared_memory.Lane | None) -> Iterator[bytes]:
    """Yields `count` replies, as few messages as possible: each holds every reply ready.
    Large parts go through `lane` when the client invited that."""
    while count:
        frames = outbox.get()
        count -= 1
        while count and not outbox.empty():
            frames = frames + outbox.get()
            count -= 1
        yield serialization.join_message(frames, lane)


def _result_frame(call_id: int, method: str, result: Any) -> list[serialization.OutFrame]:
    try:
        parts = serialization.dumps(result)
    except Exception as e:  # noqa: BLE001 - report an unpicklable result to the caller
        error = errors.SerializationError(
            f"Cannot pickle the result of {method!r} (of type {type(result).__name__}): {e}")
        return _error_frame(call_id, error)
    return [serialization.encode_frame(Kind.RESULT, call_id, "", parts)]


def _future_frame(call_id: int, method: str,
                  future: concurrent.futures.Future) -> list[serialization.OutFrame]:
    if future.cancelled():
        return _error_frame(call_id, concurrent.futures.CancelledError(
            f"{method!r} was cancelled on the server"))
    exc = future.exception()
    if exc is not None:
        return _error_frame(call_id, exc)
    return _result_frame(call_id, method, future.result())


def _error_frame(call_id: int, exc: BaseException) -> list[serialization.OutFrame]:
    return [serialization.encode_frame(Kind.ERROR, call_id, "",
                                       serialization.dumps_exception(exc))]
