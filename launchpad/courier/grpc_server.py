"""The gRPC transport's server: each stream driven by its own thread, on its own queue.

grpcio's server (`grpc.server`) takes every event of every stream on one polling thread: each
message a stream receives, and each reply it sends, is handed between that thread and the
stream's, and both must take the GIL. At 1,250 streams (10,000 nodes through their agents)
that made 64% of the controller's CPU the kernel's, switching threads and waking futexes.
Here, as the client's streams are (grpc_transport.Stream), each stream is bound, when gRPC's
core hands it over, to a completion queue of its own, and the stream's thread waits on that
queue alone: a message wakes that thread and nobody else, and its reply is sent by it.

One thread (`courier-grpc-accept`) takes new streams from the core, keeping `_ASKED`
requests for them open so that a burst does not wait for Python between two streams; the
core holds the rest in its backlog (grpc_transport's server options). A stream's thread
checks its token before it reads anything of it (so nothing from an unauthenticated peer
is unpickled), then answers its messages one at a time through the server
(streams.SocketService), as the local socket's threads do.

Stopping refuses new streams, gives those open `grace` seconds to end, then cancels them
(a stopping courier server has answered every call by then: see server.py).
"""

from __future__ import annotations

import queue
import threading
from typing import NoReturn

import grpc
from absl import logging
from grpc import _common as grpc_common
from grpc._cython import cygrpc

from launchpad.courier import allocator, errors, limits, shared_memory, streams
from launchpad.courier.grpc_transport import (
    MESSAGE_OPTIONS,
    SHARED_MEMORY_METADATA_KEY,
    STREAM_METHOD,
    TOKEN_METADATA_KEY,
    metadata_value,
)
from launchpad.courier.threads import DaemonThreadPool
from launchpad.courier.tls import TLS

# Each open stream holds one of these threads for its lifetime; handlers run elsewhere.
MAX_STREAMS = 4096
_SERVER_OPTIONS = MESSAGE_OPTIONS + [
    # New streams that come faster than Python takes them wait in the core's backlog, and
    # past 1,000 waiting (its default) the core refuses a growing share with CANCELLED:
    # thousands of nodes registering at once met that. As many may wait as the server has
    # threads for.
    ("grpc.server.max_pending_requests", MAX_STREAMS),
    ("grpc.server.max_pending_requests_hard_limit", MAX_STREAMS),
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
_ASKED = 8  # requests for new streams open at once, each with the queue of its stream
_METHOD = STREAM_METHOD.encode()
_SHUTDOWN = "shutdown"
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
        self._notifications = cygrpc.CompletionQueue()
        self._server.register_completion_queue(self._notifications)
        self._pool = DaemonThreadPool(MAX_STREAMS, thread_name_prefix="courier-stream")
        self._lock = threading.Lock()
        self._stopping = False
        self._stopped = threading.Event()  # every stream has ended and the core let go
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if tls is None:
            self.port = self._server.add_http2_port(target.encode())
        else:
            self.port = self._server.add_http2_port(
                target.encode(), tls.server_credentials()._credentials)
        if self.port == 0:
            # gRPC reports credentials it cannot use as a failure to bind, too.
            unusable = "" if tls is None else " (or the TLS key is not that of its certificate)"
            raise errors.AddressInUseError(f"Cannot bind a courier server to {target}: the "
                                           f"port is in use or not available{unusable}")

    def start(self) -> None:
        self._server.start()
        for _ in range(_ASKED):
            self._ask_for_stream()
        threading.Thread(target=self._accept, name="courier-grpc-accept", daemon=True).start()

    def stop(self, grace: float) -> None:
        """Refuses new streams, lets those open end for `grace` seconds, then cancels them;
        returns once the core has let go of every one."""
        with self._lock:
            if not self._stopping:
                self._stopping = True
                self._server.shutdown(self._notifications, _SHUTDOWN)
        if not self._stopped.wait(grace):
            with self._lock:  # (the core's server must not be destroyed meanwhile)
                if not self._stopped.is_set():
                    self._server.cancel_all_calls()
            self._stopped.wait()
        # Stream threads run calls: one stuck in user code must not hold up the stop (a
        # thread cannot be killed); it ends when its call returns, or with the process.
        self._pool.shutdown(wait=False)

    def _ask_for_stream(self) -> None:
        """Asks the core for the next new stream, bound to a queue of its own (its tag)."""
        call_queue = cygrpc.CompletionQueue()
        self._server.request_call(call_queue, self._notifications, call_queue)

    def _accept(self) -> None:
        """Hands each new stream to a thread of its own, until the server has shut down."""
        while True:
            event = self._notifications.poll()
            if event.completion_type == cygrpc.CompletionType.queue_shutdown:
                return
            if event.tag == _SHUTDOWN:
                with self._lock:
                    self._server.destroy()
                    self._stopped.set()
                self._notifications.shutdown()  # what is left in it comes, then its end
                continue
            if not event.success:  # a request the shutdown ended: no stream came
                _let_go(event.tag)
                continue
            stream = _ServerStream(event.call, event.tag)
            self._pool.submit(self._serve, stream, event.invocation_metadata,
                              event.call_details.method)
            with self._lock:
                if not self._stopping:
                    self._ask_for_stream()

    def _serve(self, stream: "_ServerStream", metadata, method: bytes) -> None:
        """One stream, on its own thread: admitted, then answered message by message."""
        peer, lane, attached = _GrpcPeer(stream, metadata), None, False
        try:
            if method != _METHOD:
                stream.end(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
                return
            lane = self._service.admit(peer)  # (PeerAborted if refused: nothing attached)
            self._service.attach(peer)
            attached = True
            outbox: queue.SimpleQueue = queue.SimpleQueue()
            while (message := stream.receive()) is not None:
                for reply in self._service.replies(peer, message, lane, outbox):
                    stream.send(reply)
                del message  # not kept while the stream waits for its next one
            stream.end(grpc.StatusCode.OK, "")
        except streams.PeerAborted as e:
            stream.end(e.code, e.details)
        except streams.StreamBroken:  # the client went away, or the server was stopped
            pass
        except Exception:  # noqa: BLE001 - a failure of ours: said to the client, not its text
            logging.exception("Courier gRPC stream failed")
            stream.end(grpc.StatusCode.INTERNAL, "courier: the server failed (see its log)")
        finally:
            if attached:
                self._service.end_stream(peer, lane)
            stream.finish()


class _ServerStream:
    """The server's end of one gRPC stream, driven by its own thread on its own queue.

    At most one message is sent at a time (gRPC's rule), so a reply waits for the last to
    have gone to the transport; that wait is on this queue too, and rarely sleeps.
    """

    def __init__(self, call, call_queue: cygrpc.CompletionQueue):
        self._call = call
        self._queue = call_queue
        self._due: set[str] = set()
        self._metadata_sent = False
        self._ended = False
        # Learns when the client has gone (its cancel, or its connection lost).
        self._start((cygrpc.ReceiveCloseOnServerOperation(_NO_FLAGS),), _CLOSE)

    def send_initial_metadata(self, metadata: tuple) -> None:
        self._metadata_sent = True
        self._start((cygrpc.SendInitialMetadataOperation(metadata, _NO_FLAGS),), _METADATA)

    def receive(self) -> bytes | None:
        """The next message, or None once the client has said it sends no more.

        Raises:
          streams.StreamBroken: the stream was cancelled (by its client or the stop).
        """
        self._start((cygrpc.ReceiveMessageOperation(_NO_FLAGS),), _RECEIVE)
        event = self._wait_for(_RECEIVE)
        if not event.success:
            raise streams.StreamBroken(grpc.StatusCode.CANCELLED, "the stream was cancelled")
        return event.batch_operations[0].message()

    def send(self, chunks: list) -> None:
        if _SEND in self._due:
            if not self._wait_for(_SEND).success:
                raise streams.StreamBroken(grpc.StatusCode.CANCELLED, "the send failed")
        operations = (cygrpc.SendMessageOperation(b"".join(chunks), _NO_FLAGS),)
        self._start(self._with_metadata(operations), _SEND)

    def end(self, code: grpc.StatusCode, details: str) -> None:
        """Ends the stream with a status (after every message sent)."""
        if self._ended:
            return
        self._ended = True
        status = grpc_common.STATUS_CODE_TO_CYGRPC_STATUS_CODE[code]
        operations = (cygrpc.SendStatusFromServerOperation((), status, details, _NO_FLAGS),)
        try:
            self._start(self._with_metadata(operations), _STATUS)
        except streams.StreamBroken:
            pass  # the call is over already

    def finish(self) -> None:
        """Waits for what is outstanding on the stream (cancelled first if it has not
        ended), then lets go of its queue."""
        if not self._ended or _RECEIVE in self._due:
            self._call.cancel(cygrpc.StatusCode.cancelled, "courier: the stream ended")
        while self._due:
            self._next_event()
        _let_go(self._queue)

    def _with_metadata(self, operations: tuple) -> tuple:
        if self._metadata_sent:
            return operations
        self._metadata_sent = True
        return (cygrpc.SendInitialMetadataOperation((), _NO_FLAGS), *operations)

    def _start(self, operations: tuple, tag: str) -> None:
        if self._call.start_server_batch(operations, tag) != cygrpc.CallError.ok:
            raise streams.StreamBroken(grpc.StatusCode.CANCELLED, "the stream is over")
        self._due.add(tag)

    def _wait_for(self, tag: str):
        while True:
            event = self._next_event()
            if event.tag == tag:
                return event

    def _next_event(self):
        event = self._queue.poll()
        self._due.discard(event.tag)
        return event


def _let_go(call_queue: cygrpc.CompletionQueue) -> None:
    """Shuts a stream's queue down once nothing is outstanding on it."""
    call_queue.shutdown()
    while call_queue.poll().completion_type != cygrpc.CompletionType.queue_shutdown:
        pass


class _GrpcPeer:
    """The server's view of one gRPC stream (streams.Peer)."""

    __slots__ = ("token", "_stream", "_offer")

    def __init__(self, stream: _ServerStream, metadata):
        self.token = metadata_value(metadata, TOKEN_METADATA_KEY)
        self._stream = stream
        self._offer = metadata_value(metadata, SHARED_MEMORY_METADATA_KEY)

    def accept_shared_memory(self) -> shared_memory.Lane | None:
        """If the client offered a lane and its probe is readable from here, answers with
        this process's probe and returns the lane."""
        if not self._offer or not shared_memory.enabled():
            return None
        peer = shared_memory.verify_probe(self._offer)
        if peer is None:
            return None
        self._stream.send_initial_metadata(
            ((SHARED_MEMORY_METADATA_KEY, shared_memory.local_probe()),))
        return shared_memory.Lane(peer)

    def abort(self, code: grpc.StatusCode, details: str) -> NoReturn:
        raise streams.PeerAborted(code, details)

    def cancel(self) -> None:
        """Nothing here: the server's graceful stop (GrpcServer.stop) ends the stream once
        what it sent has gone out. Cancelling it now could drop a reply gRPC has accepted
        but not yet written (a call that ended its node lost its reply so)."""
