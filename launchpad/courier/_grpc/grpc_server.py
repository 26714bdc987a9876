"""The gRPC transport's server: every stream on one completion queue, served by few threads.

grpcio's own server (`grpc.server`) takes every event of every stream on one polling thread
and hands each to the stream's thread, both taking the GIL. A thread per stream, each on a
completion queue of its own, cost less per message but more at rest: a waiting thread wakes
every 200 ms to look for signals, and at 1,250 streams (10,000 nodes through their agents)
those wake-ups, each taking the GIL, were most of the controller's CPU. So, as the local
socket's streams do (socket_server.py), every stream is bound to the server's one completion
queue, and a few threads wait in it (threads.Pollers): the thread that takes an event handles
it itself, with no hand-off, and a thread is added whenever the last one waiting takes one.

* **New streams.** `_ASKED` requests for new streams are kept open, so that a burst does not
  wait for Python between two streams; the core holds the rest in its backlog. A stream's
  token is checked before anything of it is read (so nothing from an unauthenticated peer is
  unpickled).
* **Messages.** A stream always has one receive open while it waits. The thread that takes a
  message answers it through the server (streams.SocketService) and sends the last reply in
  one batch with the receive of the next message: one event per exchange. gRPC allows one
  message on its way at a time, so a reply that comes while the one before it is still on its
  way waits in the stream's queue, which the completion of that send starts.
* **Stopping** refuses new streams, gives those open `grace` seconds to end, then cancels
  them (a stopping courier server has answered every call by then: see server.py).
"""

from __future__ import annotations

import collections
import queue
import threading
from collections.abc import Callable
from typing import NoReturn

from absl import logging
from grpc._cython import cygrpc

from launchpad.courier import errors
from launchpad.courier._grpc import credentials, limits
from launchpad.courier._grpc.grpc_wire import (
    MESSAGE_OPTIONS,
    OFFER_METHOD,
    PORT_METADATA_KEY,
    SHARED_MEMORY_METADATA_KEY,
    STREAM_METHOD,
    TOKEN_METADATA_KEY,
    core_status,
    metadata_value,
)
from launchpad.courier._process import allocator, threads
from launchpad.courier._shared_memory import lanes, memory_files
from launchpad.courier._status import Status
from launchpad.courier._wire import streams
from launchpad.courier.tls import TLS

_BACKLOG = 4096  # new streams the core holds while Python takes them
_MAX_THREADS = 4096  # streams being answered at once (a call that blocks holds one)
_SERVER_OPTIONS = MESSAGE_OPTIONS + [
    # New streams that come faster than Python takes them wait in the core's backlog, and
    # past 1,000 waiting (its default) the core refuses a growing share with CANCELLED:
    # thousands of nodes registering at once met that.
    ("grpc.server.max_pending_requests", _BACKLOG),
    ("grpc.server.max_pending_requests_hard_limit", _BACKLOG),
    # Without this gRPC sets SO_REUSEPORT and two servers silently share one port.
    ("grpc.so_reuseport", 0),
    # A connection that has not finished its handshake (TLS, then HTTP/2's settings) within
    # this long is closed. gRPC's default, 120 s, let idle connections that never send a byte
    # hold the server's file descriptors for minutes (see limits.py). 5 s is still ample
    # for real clients: a TLS 1.2 handshake over a link with a 500 ms round trip takes about
    # 1.5 s (TCP, two TLS round trips, the settings), and the server's side is ~1 ms of CPU.
    ("grpc.server_handshake_timeout_ms", 5_000),
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 5_000),
    ("grpc.http2.max_ping_strikes", 0),
    ("grpc.keepalive_permit_without_calls", 1),
]
_ASKED = 8  # requests for new streams open at once
_METHOD = STREAM_METHOD.encode()
_OFFER_METHOD = OFFER_METHOD.encode()
_NEW_STREAM, _SHUTDOWN = "new stream", "shutdown"  # the server's own tags
# The operations of a stream, each at most once on its way (the tag of its completion).
_CLOSE, _METADATA, _RECEIVE, _SEND, _STATUS = "close", "metadata", "receive", "send", "status"
_NO_FLAGS = 0


class GrpcServer:
    """A gRPC server whose only method is the courier stream, served by `service`."""

    def __init__(self, service: streams.SocketService, host: str, port: int,
                 tls: TLS | None = None):
        allocator.retain_freed_memory()
        self._service = service
        options = _SERVER_OPTIONS + [
            ("grpc.max_allowed_incoming_connections", limits.incoming_connections_cap())]
        self._server = cygrpc.Server(tuple(options), False)
        self._queue = cygrpc.CompletionQueue()  # new streams, every stream's events, the end
        self._server.register_completion_queue(self._queue)
        self._pollers = threads.Pollers("courier-grpc", self._next_event, self._handle,
                                        ended=lambda: None, max_threads=_MAX_THREADS)
        self._lock = threading.Lock()
        self._stopping = False
        self._stopped = threading.Event()  # every stream has ended and the core let go
        # Streams not yet let go: the queue is shut down only once the core has let go and
        # these are none, for a thread that answers one may still start its operations.
        self._streams = 0
        self.tcp_port: int | None = None  # the port offered to clients (tcp_sockets.py)
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if tls is None:
            self.port = self._server.add_http2_port(target.encode())
        else:
            self.port = self._server.add_http2_port(
                target.encode(), credentials.server_credentials(tls)._credentials)
        if self.port == 0:
            # gRPC reports credentials it cannot use as a failure to bind, too.
            unusable = "" if tls is None else " (or the TLS key is not that of its certificate)"
            raise errors.AddressInUseError(f"Cannot bind a courier server to {target}: the "
                                           f"port is in use or not available{unusable}")

    def start(self) -> None:
        self._server.start()
        for _ in range(_ASKED):
            self._server.request_call(self._queue, self._queue, _NEW_STREAM)
        self._pollers.start()

    def stop(self, grace: float) -> None:
        """Refuses new streams, lets those open end for `grace` seconds, then cancels them;
        returns once the core has let go of every one. (A thread still running a call
        stuck in user code is left to it: it ends when its call returns, or with the
        process.)"""
        with self._lock:
            if not self._stopping:
                self._stopping = True
                self._server.shutdown(self._queue, _SHUTDOWN)
        if not self._stopped.wait(grace):
            with self._lock:  # (the core's server must not be destroyed meanwhile)
                if not self._stopped.is_set():
                    self._server.cancel_all_calls()
            self._stopped.wait()

    def _next_event(self):
        event = self._queue.poll()
        if event.completion_type == cygrpc.CompletionType.queue_shutdown:
            return threads.ENDED
        return event

    def _handle(self, event) -> None:
        tag = event.tag
        if tag == _NEW_STREAM:
            self._open(event)
        elif tag == _SHUTDOWN:
            with self._lock:
                self._server.destroy()
                self._stopped.set()
                last = not self._streams
            if last:
                self._queue.shutdown()  # what is left in it comes, then its end
        else:
            stream, operation = tag
            if operation == _RECEIVE:
                self._answer(stream, event)
            else:
                stream.completed(operation, event.success)

    def _open(self, event) -> None:
        """Admits a new stream (or ends it, refused) and waits for its first message."""
        with self._lock:
            if not self._stopping:
                self._server.request_call(self._queue, self._queue, _NEW_STREAM)
        if not event.success:  # a request the shutdown ended: no stream came
            return
        with self._lock:
            self._streams += 1
        stream = _ServerStream(event.call, self._forget)
        with stream:
            if event.call_details.method == _OFFER_METHOD:  # (tcp_sockets.py)
                offer = () if self.tcp_port is None else ((PORT_METADATA_KEY,
                                                           str(self.tcp_port)),)
                stream.end(Status.OK, "", offer)
                return
            if event.call_details.method != _METHOD:
                stream.end(Status.UNIMPLEMENTED, "Method not found!")
                return
            peer = _GrpcPeer(stream, event.invocation_metadata)
            stream.lane = self._service.admit(peer)  # (PeerAborted if refused)
            self._service.attach(peer)
            stream.peer = peer
            stream.receive()

    def _forget(self, stream: _ServerStream) -> None:
        """Forgets a stream let go; the last one after the core's shutdown shuts the queue."""
        if stream.peer is not None:
            self._service.end_stream(stream.peer, stream.lane)
        with self._lock:
            self._streams -= 1
            last = self._stopped.is_set() and not self._streams
        if last:
            self._queue.shutdown()

    def _answer(self, stream: _ServerStream, event) -> None:
        """Answers the message a receive brought (the batch may have carried the reply to
        the one before); None is the client's end of the stream."""
        with stream:
            stream.completed(_RECEIVE, event.success)
            if not event.success:
                raise errors.StreamBroken(Status.CANCELLED, "the stream was cancelled")
            message = event.batch_operations[-1].message()
            if message is None:
                stream.end(Status.OK, "")
                return
            for reply, last in self._service.replies(stream.peer, message, stream.lane,
                                                     stream.outbox):
                if last:  # sent once the server is done with the message (see __enter__)
                    final = reply
                else:
                    stream.send(reply, then_receive=False)
            del message  # not kept while the stream waits for its next one
            stream.send(final, then_receive=True)


class _ServerStream:
    """The server's end of one gRPC stream, its operations completed on the server's queue
    (whichever thread takes them). It is let go once it is over: nothing of it on its way,
    and no thread answering it."""

    def __init__(self, call, gone: Callable[[_ServerStream], None]):
        self.peer: _GrpcPeer | None = None  # once attached
        self.lane: lanes.Lane | None = None
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._call = call
        self._gone = gone
        self._lock = threading.Lock()
        self._due: set[str] = set()
        self._queued: collections.deque = collections.deque()  # sends after the one on its way
        self._sending = False
        self._busy = 0  # threads answering it
        self._broken = False
        self._metadata_sent = False
        self._ended = False
        # Learns when the call is over (its status sent, its client's cancel, its
        # connection lost): until then, the stream is not let go.
        self._start((cygrpc.ReceiveCloseOnServerOperation(_NO_FLAGS),), _CLOSE)

    def __enter__(self) -> None:
        """A thread answers the stream: it is not let go meanwhile. (Two may, for a moment:
        one that has just opened the receive of the next message, and the one that takes
        that message.)"""
        with self._lock:
            self._busy += 1

    def __exit__(self, kind, error, traceback) -> bool:
        """The thread is done with the stream; how the answer failed ends it so (with the
        status of an abort, or broken), and one that is over is let go."""
        try:
            if isinstance(error, errors.PeerAborted):
                self.end(error.code, error.details)
            elif isinstance(error, errors.StreamBroken):
                self.cancel()
            elif isinstance(error, Exception):  # a failure of ours: said, not its text
                logging.error("Courier gRPC stream failed", exc_info=error)
                self.end(Status.INTERNAL, "courier: the server failed (see its log)")
        except errors.StreamBroken:
            self.cancel()
        with self._lock:
            self._busy -= 1
            over = self._over()
        if over:
            self._let_go()
        return isinstance(error, Exception)

    def send_initial_metadata(self, metadata: tuple) -> None:
        self._metadata_sent = True
        self._start((cygrpc.SendInitialMetadataOperation(metadata, _NO_FLAGS),), _METADATA)

    def receive(self) -> None:
        """Opens the receive of the next message."""
        self._start((cygrpc.ReceiveMessageOperation(_NO_FLAGS),), _RECEIVE)

    def send(self, chunks: list, then_receive: bool) -> None:
        """Sends a reply, with the receive of the next message if it is the last."""
        operations = (cygrpc.SendMessageOperation(b"".join(chunks), _NO_FLAGS),)
        if then_receive:
            self._send_in_order(operations + (cygrpc.ReceiveMessageOperation(_NO_FLAGS),),
                                _RECEIVE)
        else:
            self._send_in_order(operations, _SEND)

    def end(self, code: Status, details: str, metadata: tuple = ()) -> None:
        """Ends the stream with a status (after every message sent)."""
        if self._ended:
            return
        self._ended = True
        status = core_status(code)
        self._send_in_order((cygrpc.SendStatusFromServerOperation(metadata, status, details,
                                                                  _NO_FLAGS),), _STATUS)

    def cancel(self) -> None:
        """Ends the stream without a status (it broke), if it has not ended."""
        if not self._ended:
            self._ended = True
            self._call.cancel(cygrpc.StatusCode.cancelled, "courier: the stream ended")

    def completed(self, operation: str, success: bool) -> None:
        """Notes an operation's completion; starts the send it held up, if any."""
        with self._lock:
            self._due.discard(operation)
            if operation in (_SEND, _RECEIVE, _STATUS):
                self._sending = False
                if not success:
                    self._broken = True
                elif self._queued:
                    try:
                        self._start_locked(*self._queued.popleft())
                        self._sending = True
                    except errors.StreamBroken:
                        pass  # the call is over: its close comes, and lets the stream go
            over = self._over()
        if over:
            self._let_go()

    def _send_in_order(self, operations: tuple, tag: str) -> None:
        if not self._metadata_sent:
            self._metadata_sent = True
            operations = (cygrpc.SendInitialMetadataOperation((), _NO_FLAGS), *operations)
        with self._lock:
            if self._broken:
                raise errors.StreamBroken(Status.CANCELLED, "the send failed")
            if self._sending:
                self._queued.append((operations, tag))
            else:
                self._start_locked(operations, tag)
                self._sending = True

    def _start(self, operations: tuple, tag: str) -> None:
        with self._lock:
            self._start_locked(operations, tag)

    def _start_locked(self, operations: tuple, tag: str) -> None:
        if self._call.start_server_batch(operations, (self, tag)) != cygrpc.CallError.ok:
            self._broken = True
            raise errors.StreamBroken(Status.CANCELLED, "the stream is over")
        self._due.add(tag)

    def _over(self) -> bool:
        """Nothing of the stream on its way (its close among it: the call is over) and no
        thread answering it (lock held)."""
        return not self._due and not self._busy and self._call is not None

    def _let_go(self) -> None:
        with self._lock:
            if self._call is None:
                return
            self._call = None  # (once)
        self._gone(self)


class _GrpcPeer:
    """The server's view of one gRPC stream (streams.Peer)."""

    __slots__ = ("token", "_stream", "_offer")

    def __init__(self, stream: _ServerStream, metadata):
        self.token = metadata_value(metadata, TOKEN_METADATA_KEY)
        self._stream = stream
        self._offer = metadata_value(metadata, SHARED_MEMORY_METADATA_KEY)

    def accept_shared_memory(self) -> lanes.Lane | None:
        """If the client offered a lane and its probe is readable from here, answers with
        this process's probe and returns the lane."""
        if not self._offer or not lanes.enabled():
            return None
        peer = memory_files.verify_probe(self._offer)
        if peer is None:
            return None
        self._stream.send_initial_metadata(
            ((SHARED_MEMORY_METADATA_KEY, memory_files.local_probe()),))
        return lanes.Lane(peer)

    def abort(self, code: Status, details: str) -> NoReturn:
        raise errors.PeerAborted(code, details)

    def cancel(self) -> None:
        """Nothing here: the server's graceful stop (GrpcServer.stop) ends the stream once
        what it sent has gone out. Cancelling it now could drop a reply gRPC has accepted
        but not yet written (a call that ended its node lost its reply so)."""
