"""The courier server: serves every public method of one Python object, on every transport.

A stream's messages are answered one at a time, each by the thread that read it (a gRPC
server thread that took it from the completion queue, grpc_server.py; a stream thread its
epoll woke, socket_server.py), which runs the calls it reads (`replies`, call_batches.py):

    read a message -> run its calls (quick ones here, in order; others on workers, but the
                      last) -> yield the replies (coalesced) -> read the next message

Running a call on the thread that read it costs no thread hand-off, and is safe because a
client sends a message on a stream only when every call it sent there before has been
answered (see client.py): a call that blocks holds up no other call's run (a quick
method's, for `call_batches.INLINE_SECS` at most). At most `thread_pool_size` calls run at
once, however many streams are open. A client of this process calls straight in (`run_here`).

A method that returns a `concurrent.futures.Future` (a batched handler does) is answered when
the future completes, without holding a call slot meanwhile. A server can start before its
object exists (`Server(None)` then `serve(obj)`): calls that arrive early wait for it, so a node
can publish its address before it builds the object that answers.

A client on this host may send large parts through shared memory (the stream's lane, see
lanes.py), and invite replies the same way. The lane's region for replies is reused
from its start when the next message arrives: the client sends it only after reading every
reply to the one before.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextvars
import hmac
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from absl import logging

from launchpad.courier import errors, metrics
from launchpad.courier._process.threads import DaemonThreadPool
from launchpad.courier._serving import call_batches, endpoints, replies, served_methods
from launchpad.courier._shared_memory import lanes
from launchpad.courier._status import Status
from launchpad.courier._wire import serialization, streams
from launchpad.courier.tls import TLS


class _CallHere:
    """A call run on its caller's thread (`Server.run_here`), while it is unanswered."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


_STREAMS_END_SECS = 1.0  # how long stop() waits for cancelled streams to let go of memory


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
      local_only: serve this host's clients alone (in-process, the Unix socket): no gRPC, no
        TCP port (endpoints.Endpoints says when it serves every transport all the same).
    """

    def __init__(self, obj: Any = None, *, port: int = 0, host: str = "127.0.0.1",
                 token: str = "", thread_pool_size: int = 16, tls: TLS | None = None,
                 local_only: bool = False):
        if thread_pool_size < 1:
            raise ValueError(f"thread_pool_size must be >= 1, got {thread_pool_size}")
        self._host = host
        self._port = port
        self._token = token
        self._tls = tls
        self._local_only = local_only
        self._obj = obj
        self._ready = threading.Event()
        if obj is not None:
            self._ready.set()
        self._stopped = threading.Event()
        self._stop_lock = threading.Lock()
        # Calls received and not yet answered, and open streams: stop() lets the first drain
        # and then ends the second, so no accepted call loses its reply. The calls are a
        # dict used as a set (one store or delete: atomic, no lock on the hot path); stop()
        # is woken as they change only once it has begun.
        self._unanswered: dict[serialization.Frame, None] = {}
        self._drained = threading.Condition()
        # Open streams -> whether they wait for the next message (every reply sent).
        self._streams: dict[streams.Peer, bool] = {}
        self._endpoints: endpoints.Endpoints | None = None
        self._workers: DaemonThreadPool | None = None
        # Tokens of the calls that may run at once (a C-level queue: cheap on the hot path).
        self._call_slots: queue.SimpleQueue = queue.SimpleQueue()
        for _ in range(thread_pool_size):
            self._call_slots.put(None)
        self._context = contextvars.copy_context()
        self._address = ""
        self.metrics = metrics.CallMetrics()  # every answered call, by method
        self._batches = call_batches.CallBatches(self.metrics)  # how a message's calls run

    @property
    def address(self) -> str:
        """host:port of the running server; empty before `start()`."""
        return self._address

    @property
    def port(self) -> int:
        return int(self._address.rsplit(":", 1)[1]) if self._address else 0

    def start(self) -> str:
        """Binds and starts serving; returns the bound address ('host:port')."""
        if self._endpoints is not None:
            raise RuntimeError(f"Courier server at {self._address} is already started")
        # Handlers run in the context of the thread that started the server, so code served by
        # a node sees that node's context (who am I, my program) on every handler thread.
        self._context = contextvars.copy_context()
        # Runs the calls of a message but its last: no more threads than calls may run at
        # once (each takes a call slot), so a message of thousands of calls (a burst of
        # futures) waits in the pool's queue, not in thousands of threads.
        self._workers = DaemonThreadPool(self._call_slots.qsize(),
                                         thread_name_prefix="courier-worker")
        self._endpoints = endpoints.Endpoints(self, self._host, self._port, self._tls,
                                              self._local_only)
        host = f"[{self._host}]" if ":" in self._host else self._host
        self._address = f"{host}:{self._endpoints.port}"
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
            if self._stopped.is_set() and self._endpoints is None:
                return
            self._stopped.set()
            self._ready.set()  # calls waiting for an object to serve fail now
            if self._endpoints is not None:
                self._endpoints.refuse_new_streams()
            with self._drained:
                if not self._drained.wait_for(self._quiet, timeout=grace):
                    self._warn_unanswered(grace)
                streams = list(self._streams)
            for stream in streams:
                stream.cancel()  # idle: its thread waits for a message that will not come
            if self._endpoints is not None:
                self._endpoints.stop()
                self._endpoints = None
            with self._drained:
                self._drained.wait_for(lambda: not self._streams, timeout=_STREAMS_END_SECS)
            self._batches.close()
            if self._workers is not None:
                self._workers.shutdown(wait=False, cancel_futures=True)

    def _warn_unanswered(self, grace: float) -> None:
        """Names the calls still running after the grace period (lock held). Their threads
        are left to them and end with their call, or with the process (see threads.py)."""
        calls = collections.Counter(frame.name for frame in list(self._unanswered))
        running = ", ".join(name if count == 1 else f"{name} (x{count})"
                            for name, count in sorted(calls.items()))
        logging.warning("Courier server at %s stopped with %d call(s) unanswered after %gs "
                        "(%s); they are left to finish and do not keep the process alive",
                        self._address, len(self._unanswered), grace,
                        f"still running: {running}" if running else "replies not yet sent")

    def _quiet(self) -> bool:
        """Every call received has been answered and every reply sent (lock held)."""
        return not self._unanswered and all(self._streams.values())

    def __enter__(self) -> "Server":
        if self._endpoints is None:
            self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # ------------------------------------------------------------------ streams

    def admits(self, token: str) -> bool:
        """Whether a stream carrying `token` may be served: compared in constant time, as
        UTF-8 (hmac compares only ASCII text), so a token of any characters is only wrong."""
        if not self._token:
            return True
        return isinstance(token, str) and hmac.compare_digest(
            token.encode("utf-8", "surrogatepass"), self._token.encode("utf-8", "surrogatepass"))

    def admit(self, peer: streams.Peer) -> lanes.Lane | None:
        """Checks a socket stream's token before anything of it is read (the stream is
        aborted if it is wrong); returns the stream's shared-memory lane, if it has one."""
        if not self.admits(peer.token):
            peer.abort(Status.PERMISSION_DENIED, streams.REFUSED_DETAILS)
        return peer.accept_shared_memory()

    def replies(self, peer: streams.Peer, message: bytes | memoryview,
                lane: lanes.Lane | None,
                outbox: queue.SimpleQueue) -> Iterator[tuple[list, bool]]:
        """The chunks of each reply to one message of a socket stream (gRPC or local), each
        with whether it is the last. The stream waits for its next message again once its
        transport, having sent the last reply, asks for more."""
        self._set_waiting(peer, False)
        yield from self._answer(peer, message, lane, outbox, run_last_here=True)
        del message
        self._set_waiting(peer, True)

    def end_stream(self, peer: streams.Peer, lane: lanes.Lane | None) -> None:
        """Forgets a socket stream that ended, and lets go of its lane."""
        if lane is not None:
            lane.close()
        self.detach(peer)

    def serving(self) -> bool:  # in_process.Target: False once stop() has begun
        return not self._stopped.is_set()

    def attach(self, peer: streams.Peer) -> None:
        """Counts a new stream, waiting for its first message; one that comes as it stops
        is ended (stop() ends those it counted before it began)."""
        self._set_waiting(peer, True)
        if not self.serving():
            peer.cancel()

    def detach(self, peer: streams.Peer) -> None:
        """Forgets a stream that ended."""
        with self._drained:
            self._streams.pop(peer, None)
            self._drained.notify_all()

    def answer(self, peer: streams.Peer, message: bytes, outbox: queue.SimpleQueue,
               run_last_here: bool) -> Iterator[tuple[list, bool]]:
        """Answers one message of an in-process stream (in_process.py): its replies, each
        with whether it is the last; the stream waits again once it has the last."""
        self._set_waiting(peer, False)
        for reply, last in self._answer(peer, message, None, outbox, run_last_here):
            if last and peer in self._streams:  # (not if the stream was cancelled meanwhile)
                self._set_waiting(peer, True)
            yield reply, last

    def _answer(self, peer: streams.Peer, message: bytes, lane: lanes.Lane | None,
                outbox: queue.SimpleQueue, run_last_here: bool) -> Iterator[tuple[list, bool]]:
        """Runs the calls of one message and yields its replies (see `_replies`)."""
        try:
            frames = serialization.decode_message(message, lane.reader if lane else None)
        except ValueError as e:  # A malformed message: end this stream only.
            logging.warning("Courier server at %s ended a stream with a malformed message: %s",
                            self._address, e)
            peer.abort(Status.INVALID_ARGUMENT, f"courier: {e}")
        reply_lane = None
        if lane is not None:
            lane.writer.reset()  # the client read every reply to its last message
            if frames[0].invites_shared_memory:
                reply_lane = lane
        self._start_calls(frames, outbox, run_last_here)
        yield from replies.replies(outbox, len(frames), reply_lane)

    def _set_waiting(self, peer: streams.Peer, waiting: bool) -> None:
        self._streams[peer] = waiting  # one dict store: atomic, no lock on the hot path
        if waiting and self._stopped.is_set():
            with self._drained:  # stop() waits for every stream to be waiting
                self._drained.notify_all()

    def _start_calls(self, frames: list, outbox: queue.SimpleQueue, run_last_here: bool) -> None:
        """Runs a message's calls (call_batches.py; on workers alone if not run_last_here)."""
        # A stop that begins after this check waits for these calls: their stream is not
        # waiting (it has a message), and the calls are unanswered before it returns.
        if not self._stopped.is_set():
            self._unanswered.update(dict.fromkeys(frames))
        else:
            for frame in frames:
                outbox.put(replies.error_frame(frame.call_id, errors.ServerUnavailableError(
                    f"Courier server at {self._address} is stopping; {frame.name!r} was not "
                    "run")))
            return
        if run_last_here:
            self._batches.run(frames, lambda frame: self._run(frame, outbox),
                              lambda frame: self._workers.submit(self._run, frame, outbox))
        else:
            for frame in frames:
                self._workers.submit(self._run, frame, outbox)

    def _run(self, frame: serialization.Frame, outbox: queue.SimpleQueue) -> None:
        token = self._call_slots.get()
        try:
            self._context.copy().run(self._handle, frame, outbox)
        finally:
            self._call_slots.put(token)

    def _handle(self, frame: serialization.Frame, outbox: queue.SimpleQueue) -> None:
        started = time.perf_counter()
        try:
            result = self._invoke(frame.name, lambda: replies.load_arguments(frame), started)
        except BaseException as e:  # noqa: BLE001 - every failure goes back to the caller
            self._reply(outbox, frame, replies.error_frame(frame.call_id, e))
            return
        if isinstance(result, concurrent.futures.Future):
            result.add_done_callback(lambda f: self._reply_later(outbox, frame, f, started))
        else:
            self._reply(outbox, frame, replies.result_frame(frame.call_id, frame.name, result))
            self.metrics.record(frame.name, time.perf_counter() - started, False)

    def _invoke(self, name: str, arguments: Callable[[], tuple[tuple, dict]],
                started: float) -> Any:
        """What method `name` returns for `arguments()` (a Future: answered later); a
        failure is counted (under UNKNOWN_METHOD if there is no such method) and raised."""
        counted = name
        try:
            self._wait_for_object(name)
            counted = metrics.UNKNOWN_METHOD
            method = self._method(name)
            counted = name
            args, kwargs = arguments()
            return method(*args, **kwargs)
        except BaseException:
            self.metrics.record(counted, time.perf_counter() - started, True)
            raise

    def _reply_later(self, outbox: queue.SimpleQueue, call: serialization.Frame,
                     future: concurrent.futures.Future, started: float) -> None:
        self._reply(outbox, call, replies.future_frame(call.call_id, call.name, future))
        failed = future.cancelled() or future.exception() is not None
        self.metrics.record(call.name, time.perf_counter() - started, failed)

    def _reply(self, outbox: queue.SimpleQueue, call: serialization.Frame, frames: list) -> None:
        outbox.put(frames)
        del self._unanswered[call]
        if self._stopped.is_set():
            with self._drained:  # stop() waits for the calls to be answered
                self._drained.notify_all()

    def run_here(self, name: str, args: tuple, kwargs: dict) -> Any:
        """Runs a call on this thread for a client of this process (direct_calls.py), as a
        stream's call runs: in the server's context, within its call slots, counted, and
        waited for by a stop; its arguments copied by the caller. Raises what it raised."""
        call = _CallHere(name)
        self._unanswered[call] = None  # first: a stop that begins now waits for it
        try:
            if self._stopped.is_set():
                raise errors.ServerUnavailableError(
                    f"Courier server at {self._address} is stopping; {name!r} was not run")
            started = time.perf_counter()
            slot = self._call_slots.get()
            try:
                result = self._context.copy().run(self._invoke, name, lambda: (args, kwargs),
                                                  started)
            finally:
                self._call_slots.put(slot)
            if isinstance(result, concurrent.futures.Future):  # waited for without a slot
                return self._result_of(name, result, started)
            self.metrics.record(name, time.perf_counter() - started, False)
            return result
        finally:
            del self._unanswered[call]
            if self._stopped.is_set():
                with self._drained:
                    self._drained.notify_all()

    def _result_of(self, name: str, future: concurrent.futures.Future, started: float) -> Any:
        """What a direct call's future (a batched handler's) comes to, counted then."""
        try:
            result = replies.future_result(name, future)
        except BaseException:
            self.metrics.record(name, time.perf_counter() - started, True)
            raise
        self.metrics.record(name, time.perf_counter() - started, False)
        return result

    def _wait_for_object(self, name: str) -> None:
        if not self._ready.is_set():  # (a set event's wait still takes its lock)
            self._ready.wait()
        if self._obj is None:
            raise errors.ServerUnavailableError(
                f"Courier server at {self._address} stopped before serving {name!r}")

    def _method(self, name: str):
        return served_methods.method_of(self._obj, name, self._address)
