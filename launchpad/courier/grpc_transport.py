"""The gRPC transport: between hosts (and wherever a faster transport is not there).

Every call travels on a long-lived bidirectional gRPC stream. Both directions carry messages
made of one or more frames (see serialization.py); calls are matched to results by id, so
calls queued together travel as one message. One message each way per call is what makes a
stream cheaper than a unary gRPC call in Python (see shared/notes/STACK.md).

A client stream (`Stream`) is driven by the thread that uses it: that thread sends a message
and waits for the reply on the stream's own completion queue. grpcio's public streaming API
would instead involve three more threads per call (one consuming the request iterator, the
channel's thread polling completions, one reading replies), and on a small machine those
hand-offs cost more than the call itself: driving the stream from the caller halves the
client's CPU per call. This uses grpcio's Cython layer (`segregated_call`, the same primitive
its blocking unary calls use), which is why pyproject.toml pins grpcio to the versions where
that layer has this shape; `tests/courier/test_transport.py` checks it.

The secret token travels as call metadata when the stream opens: a stream without the right
token is aborted before any message on it is read, so nothing from an unauthenticated peer is
ever unpickled.

Between processes of one host, a stream also gets a shared-memory lane for its large parts
(shared_memory.py): the client's offer travels in the stream's metadata beside the token, and
the server's answer in its initial metadata.

With a `TLS` (tls.py), the channel is a TLS one and the server's port accepts only TLS clients
that present a certificate of its CA; that choice is made once, when the channel or port is
made, so streams, the token and the lane work the same either way and a plaintext call costs
exactly what it did. (The lane stays: it needs the same host and a peer allowed to read this
process's memory files, which is more than TLS proves.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NoReturn

import grpc
from grpc import _common as grpc_common
from grpc._cython import cygrpc

from launchpad.courier import allocator, errors, limits, shared_memory, streams
from launchpad.courier.threads import DaemonThreadPool
from launchpad.courier.tls import TLS

STREAM_METHOD = "/launchpad.courier.Courier/Stream"
TOKEN_METADATA_KEY = "x-courier-token"
SHARED_MEMORY_METADATA_KEY = "x-courier-shared-memory"
# A method no server serves: a call of it only ever learns why a channel cannot connect.
_PROBE_METHOD = "/launchpad.courier.Courier/ConnectProbe"
_PROBE_SECS = 1.0

_MESSAGE_OPTIONS = [
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
]
_CLIENT_OPTIONS = _MESSAGE_OPTIONS + [
    # Detect a peer that vanished without closing its socket (host lost, network cut).
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    # Reconnect quickly when a restarted server comes back.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2_000),
]
# Each open stream holds one of these threads for its lifetime; handlers run elsewhere.
_MAX_STREAMS = 4096
_SERVER_OPTIONS = _MESSAGE_OPTIONS + [
    # grpcio takes new streams from the core one at a time, on one Python thread; those that
    # come faster wait in the core's backlog, and past 1,000 waiting (its default) the core
    # refuses a growing share with CANCELLED. Thousands of nodes registering at once met
    # that. As many may wait as the server has threads for.
    ("grpc.server.max_pending_requests", _MAX_STREAMS),
    ("grpc.server.max_pending_requests_hard_limit", _MAX_STREAMS),
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
# The server's side of a stream: the chunks of each reply, for each message read.
StreamHandler = Callable[[Iterator[bytes], streams.Peer], Iterator[list]]


class GrpcServer:
    """A started gRPC server and the threads that run its streams."""

    def __init__(self, server: grpc.Server, pool: DaemonThreadPool, port: int):
        self.port = port
        self._server = server
        self._pool = pool

    def start(self) -> None:
        self._server.start()

    def stop(self, grace: float | None) -> None:
        self._server.stop(grace).wait()
        # Stream threads run calls: one stuck in user code must not hold up the stop (a
        # thread cannot be killed); it ends when its call returns, or with the process.
        self._pool.shutdown(wait=False)


def bind_server(handler: StreamHandler, host: str, port: int,
                tls: TLS | None = None) -> GrpcServer:
    """Binds a gRPC server whose only method is the courier stream (`start()` it); with
    `tls`, its port accepts only TLS connections from clients with a certificate of the
    TLS's CA."""
    allocator.retain_freed_memory()
    method = grpc.stream_stream_rpc_method_handler(
        lambda requests, context: _joined(handler(requests, _GrpcPeer(context))))
    service = grpc.method_handlers_generic_handler(
        STREAM_METHOD.split("/")[1], {STREAM_METHOD.split("/")[2]: method})
    pool = DaemonThreadPool(_MAX_STREAMS, thread_name_prefix="courier-stream")
    options = _SERVER_OPTIONS + [
        ("grpc.max_allowed_incoming_connections", limits.incoming_connections_cap())]
    server = grpc.server(pool, handlers=[service], options=options)
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        if tls is None:
            bound = server.add_insecure_port(target)
        else:
            bound = server.add_secure_port(target, tls.server_credentials())
    except RuntimeError as e:
        pool.shutdown()
        # gRPC reports credentials it cannot use as a failure to bind, too.
        unusable = "" if tls is None else " (or the TLS key is not that of its certificate)"
        raise errors.AddressInUseError(
            f"Cannot bind a courier server to {target}: {e}{unusable}") from e
    if bound == 0:
        pool.shutdown()
        raise errors.AddressInUseError(
            f"Cannot bind a courier server to {target}: the port is in use or not available")
    return GrpcServer(server, pool, bound)


def _joined(replies: Iterator[list]) -> Iterator[bytes]:
    for chunks in replies:
        yield b"".join(chunks)


def _metadata_value(metadata, wanted: str) -> str:
    for key, value in metadata or ():
        if key == wanted:
            return value
    return ""


class _GrpcPeer:
    """The server's view of one gRPC stream (streams.Peer)."""

    __slots__ = ("token", "_context")

    def __init__(self, context: grpc.ServicerContext):
        self._context = context
        self.token = _metadata_value(context.invocation_metadata(), TOKEN_METADATA_KEY)

    def accept_shared_memory(self) -> shared_memory.Lane | None:
        """If the client offered a lane and its probe is readable from here, answers with
        this process's probe and returns the lane."""
        offer = _metadata_value(self._context.invocation_metadata(),
                                SHARED_MEMORY_METADATA_KEY)
        if not offer or not shared_memory.enabled():
            return None
        peer = shared_memory.verify_probe(offer)
        if peer is None:
            return None
        try:
            self._context.send_initial_metadata(
                ((SHARED_MEMORY_METADATA_KEY, shared_memory.local_probe()),))
        except grpc.RpcError:  # the client is gone already
            return None
        return shared_memory.Lane(peer)

    def abort(self, code: grpc.StatusCode, details: str) -> NoReturn:
        self._context.abort(code, details)

    def cancel(self) -> None:
        """Nothing here: the server's graceful stop (GrpcServer.stop) ends the stream once
        what it sent has gone out. Cancelling it now could drop a reply gRPC has accepted
        but not yet written (a call that ended its node lost its reply so)."""


class GrpcChannel:
    """A gRPC channel to `address` (streams.Channel); with `tls`, a TLS one that presents
    the TLS's certificate and expects the server's to name `tls.server_name` (not the
    address: see tls.py)."""

    kind = "grpc"

    def __init__(self, address: str, compress: bool = False, tls: TLS | None = None):
        allocator.retain_freed_memory()
        compression = grpc.Compression.Gzip if compress else None
        if tls is None:
            self._channel = grpc.insecure_channel(address, options=_CLIENT_OPTIONS,
                                                  compression=compression)
        else:
            options = _CLIENT_OPTIONS + [("grpc.ssl_target_name_override", tls.server_name)]
            self._channel = grpc.secure_channel(address, tls.channel_credentials(),
                                                options=options, compression=compression)

    def wait_until_ready(self, timeout: float) -> bool:
        """Waits up to `timeout` seconds for the channel to connect; True if it did."""
        ready = grpc.channel_ready_future(self._channel)
        try:
            ready.result(timeout=timeout)
            return True
        except grpc.FutureTimeoutError:
            ready.cancel()  # stops its polling thread before the caller closes the channel
            return False

    def is_ready(self) -> bool:
        """Whether the channel's connection is up (a cheap, non-blocking check).

        A channel leaves READY when its connection goes away, and every stream on that
        connection is then dead, so a stream nobody watched is checked before it is used.
        """
        return self._state() == cygrpc.ConnectivityState.ready

    def reachable(self) -> bool:
        """Whether the server is there: the channel's connection is up (gRPC watches it)."""
        return self.is_ready()

    def connect_failure(self) -> str:
        """Why the channel's last attempt to connect failed, in gRPC's words (a refused
        connection, a failed TLS handshake and its reason), or "" if it is not failing.

        gRPC tells only to a call: one that does not wait for the channel to be ready fails
        at once on a failing channel, with that reason, before it reaches any server.
        """
        if self._state() != cygrpc.ConnectivityState.transient_failure:
            return ""
        try:
            self._channel.unary_unary(_PROBE_METHOD)(b"", timeout=_PROBE_SECS,
                                                     wait_for_ready=False)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNAVAILABLE:  # not if it connected meanwhile
                return e.details() or ""
        return ""

    def open_stream(self, token: str, offer_shared_memory: bool = False) -> "Stream":
        return Stream(self, token, offer_shared_memory)

    def close(self) -> None:
        self._channel.close()

    def _state(self):
        try:
            return self._channel._channel.check_connectivity_state(False)
        except ValueError:  # the channel was closed
            return None


_START, _INITIAL_METADATA, _STATUS, _EXCHANGE, _RECEIVE = (
    "start", "initial-metadata", "status", "exchange", "receive")
_NO_FLAGS = 0


class Stream:
    """One courier stream on a channel, driven by one thread at a time.

    The driving thread calls `exchange` (send a message, wait for the first reply) and then
    `receive` for further replies. Any thread may `cancel`: the driver's wait then ends with
    `StreamBroken`. A stream that broke, or that its driver no longer needs, must be
    `finish`ed by the thread that owns it: that waits for the outstanding operations, which
    frees the stream's completion queue.

    Streams never wait for the channel to be ready: the connection waits (bounded) before it
    opens any, and a stream opened after its server went away must fail, not wait forever for
    a server that may never come back.

    With `offer_shared_memory`, the stream offers the server a shared-memory lane; `lane` is
    set once the server has accepted and its probe checked out (by the first reply, at the
    latest by the second), and is closed when the stream finishes.
    """

    def __init__(self, channel: GrpcChannel, token: str, offer_shared_memory: bool = False):
        self._channel = channel
        self._due = {_START, _INITIAL_METADATA, _STATUS}
        self._status: streams.StreamBroken | None = None
        self.lane: shared_memory.Lane | None = None
        metadata = ((TOKEN_METADATA_KEY, token),)
        probe = shared_memory.local_probe() if offer_shared_memory else None
        if probe is not None:
            metadata += ((SHARED_MEMORY_METADATA_KEY, probe),)
        operations = (
            ((cygrpc.SendInitialMetadataOperation(metadata, _NO_FLAGS),), _START),
            ((cygrpc.ReceiveInitialMetadataOperation(_NO_FLAGS),), _INITIAL_METADATA),
            ((cygrpc.ReceiveStatusOnClientOperation(_NO_FLAGS),), _STATUS),
        )
        self._call = channel._channel._channel.segregated_call(
            cygrpc.PropagationConstants.GRPC_PROPAGATE_DEFAULTS, STREAM_METHOD.encode(),
            None, None, None, None, operations, None, None)

    def exchange(self, chunks: list, caller_waits: bool = False) -> bytes:
        """Sends one message (its chunks joined) and waits for the next reply; raises
        StreamBroken."""
        self._start((cygrpc.SendMessageOperation(b"".join(chunks), _NO_FLAGS),
                     cygrpc.ReceiveMessageOperation(_NO_FLAGS)), _EXCHANGE)
        return self._wait_for_message(_EXCHANGE)

    def receive(self) -> bytes:
        """Waits for the next reply; raises StreamBroken."""
        self._start((cygrpc.ReceiveMessageOperation(_NO_FLAGS),), _RECEIVE)
        return self._wait_for_message(_RECEIVE)

    def alive(self) -> bool:
        """Whether the stream's connection is still up (see GrpcChannel.is_ready)."""
        return self._status is None and self._channel.is_ready()

    def cancel(self) -> None:
        """Ends the stream; safe from any thread, at any time, more than once."""
        self._call.cancel(cygrpc.StatusCode.cancelled, "courier: the client ended the stream")

    def finish(self) -> streams.StreamBroken:
        """Cancels the stream and waits until nothing of it is outstanding (driver only);
        returns why it ended."""
        if self._due:
            self.cancel()
        while self._due:
            self._next_event()
        if self.lane is not None:
            self.lane.close()
            self.lane = None
        return self._status or streams.StreamBroken(None, "the stream was cancelled")

    def _start(self, operations: tuple, tag: str) -> None:
        if self._status is not None or not self._call.operate(operations, tag):
            raise self.finish()
        self._due.add(tag)

    def _wait_for_message(self, tag: str) -> bytes:
        while True:
            event = self._next_event()
            if event.tag != tag:
                if event.tag == _STATUS:
                    raise self.finish()
                continue  # the stream's start: nothing to do
            message = None
            if event.success:
                for operation in event.batch_operations:
                    if operation.type() == cygrpc.OperationType.receive_message:
                        message = operation.message()
            if message is None:  # the server ended the stream (its status explains why)
                raise self.finish()
            return message

    def _next_event(self):
        try:
            event = self._call.next_event()
        except BaseException:  # e.g. KeyboardInterrupt: grpcio has already freed the call
            self._due.clear()
            self._status = streams.StreamBroken(None, "the wait for the stream was interrupted")
            raise
        self._due.discard(event.tag)
        if event.tag == _INITIAL_METADATA and event.success:
            self._accept_lane(event)
        elif event.tag == _STATUS:
            for operation in event.batch_operations:
                if operation.type() == cygrpc.OperationType.receive_status_on_client:
                    code = grpc_common.CYGRPC_STATUS_CODE_TO_STATUS_CODE.get(operation.code())
                    self._status = streams.StreamBroken(code, operation.details() or "")
        return event

    def _accept_lane(self, event) -> None:
        for operation in event.batch_operations:
            if operation.type() == cygrpc.OperationType.receive_initial_metadata:
                answer = _metadata_value(operation.initial_metadata(),
                                         SHARED_MEMORY_METADATA_KEY)
                peer = shared_memory.verify_probe(answer) if answer else None
                if peer is not None:
                    self.lane = shared_memory.Lane(peer)
