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

import threading

from grpc._cython import cygrpc

from launchpad.courier import errors
from launchpad.courier._grpc import credentials, limits
from launchpad.courier._grpc.grpc_server_stream import RECEIVE, GrpcPeer, ServerStream
from launchpad.courier._grpc.grpc_wire import (
    MESSAGE_OPTIONS,
    OFFER_METHOD,
    PORT_METADATA_KEY,
    STREAM_METHOD,
)
from launchpad.courier._process import allocator, threads
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
            if operation == RECEIVE:
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
        stream = ServerStream(event.call, self._forget)
        with stream:
            if event.call_details.method == _OFFER_METHOD:  # (tcp_sockets.py)
                offer = () if self.tcp_port is None else ((PORT_METADATA_KEY,
                                                           str(self.tcp_port)),)
                stream.end(Status.OK, "", offer)
                return
            if event.call_details.method != _METHOD:
                stream.end(Status.UNIMPLEMENTED, "Method not found!")
                return
            peer = GrpcPeer(stream, event.invocation_metadata)
            self._service.open_socket_stream(peer)  # (PeerAborted if refused)
            stream.peer = peer
            stream.receive()

    def _forget(self, stream: ServerStream) -> None:
        """Forgets a stream let go; the last one after the core's shutdown shuts the queue."""
        if stream.peer is not None:
            stream.peer.messages.close()
            self._service.detach(stream.peer)
        with self._lock:
            self._streams -= 1
            last = self._stopped.is_set() and not self._streams
        if last:
            self._queue.shutdown()

    def _answer(self, stream: ServerStream, event) -> None:
        """Answers the message a receive brought (the batch may have carried the reply to
        the one before); None is the client's end of the stream."""
        with stream:
            stream.completed(RECEIVE, event.success)
            if not event.success:
                raise errors.StreamBroken(Status.CANCELLED, "the stream was cancelled")
            message = event.batch_operations[-1].message()
            if message is None:
                stream.end(Status.OK, "")
                return
            for reply, last in self._service.socket_replies(stream.peer, message,
                                                            stream.outbox):
                if last:  # sent once the server is done with the message (see __enter__)
                    final = reply
                else:
                    stream.send(reply, then_receive=False)
            del message  # not kept while the stream waits for its next one
            stream.send(final, then_receive=True)
