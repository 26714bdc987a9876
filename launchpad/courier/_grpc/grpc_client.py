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
that layer has this shape; `tests/courier/test_transport.py` checks it, the server's too.

The server's side is grpc_server.py, on the same layer: every stream is on the server's one
completion queue, where a few threads wait, each answering the message it takes.

The secret token travels as call metadata when the stream opens: a stream without the right
token is aborted before any message on it is read, so nothing from an unauthenticated peer is
ever unpickled.

Between processes of one host, a stream also gets a shared-memory lane for its large parts
(lanes.py): the client's offer travels in the stream's metadata beside the token, and
the server's answer in its initial metadata.

With a `TLS` (tls.py), the channel is a TLS one and the server's port accepts only TLS clients
that present a certificate of its CA; that choice is made once, when the channel or port is
made, so streams, the token and the lane work the same either way and a plaintext call costs
exactly what it did. (The lane stays: it needs the same host and a peer allowed to read this
process's memory files, which is more than TLS proves.)
"""

from __future__ import annotations

import grpc
from grpc._cython import cygrpc

from launchpad.courier import errors
from launchpad.courier._grpc import credentials
from launchpad.courier._grpc.grpc_wire import (
    MESSAGE_OPTIONS,
    OFFER_METHOD,
    PORT_METADATA_KEY,
    SHARED_MEMORY_METADATA_KEY,
    STREAM_METHOD,
    TOKEN_METADATA_KEY,
    metadata_value,
    status_of_core,
)
from launchpad.courier._process import allocator
from launchpad.courier._shared_memory import lanes, memory_files
from launchpad.courier._wire.messages import Messages
from launchpad.courier.tls import TLS

# A method no server serves: a call of it only ever learns why a channel cannot connect.
_PROBE_METHOD = "/launchpad.courier.Courier/ConnectProbe"
_PROBE_SECS = 1.0

_CLIENT_OPTIONS = MESSAGE_OPTIONS + [
    # Detect a peer that vanished without closing its socket (host lost, network cut).
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    # Reconnect quickly when a restarted server comes back.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2_000),
]


class GrpcChannel:
    """A gRPC channel to `address` (streams.Channel); with `tls`, a TLS one that presents
    the TLS's certificate and expects the server's to name `tls.server_name` (not the
    address: see tls.py)."""

    kind = "grpc"
    selectable = False

    def __init__(self, address: str, compress: bool = False, tls: TLS | None = None):
        allocator.retain_freed_memory()
        compression = grpc.Compression.Gzip if compress else None
        if tls is None:
            self._channel = grpc.insecure_channel(address, options=_CLIENT_OPTIONS,
                                                  compression=compression)
        else:
            options = _CLIENT_OPTIONS + [("grpc.ssl_target_name_override", tls.server_name)]
            self._channel = grpc.secure_channel(address, credentials.channel_credentials(tls),
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

    def offered_tcp_port(self) -> int | None:
        """The TCP port the server offers its records on (tcp_sockets.py), asked of the
        server over this channel, which is up; None if it offers none or does not answer
        within `_PROBE_SECS`."""
        call = self._channel.unary_stream(OFFER_METHOD)(b"", timeout=_PROBE_SECS)
        try:
            for _ in call:
                pass
            port = metadata_value(call.trailing_metadata(), PORT_METADATA_KEY)
        except grpc.RpcError:
            return None
        return int(port) if port.isdigit() else None

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

    With `offer_shared_memory`, the stream offers the server a shared-memory lane; its
    `messages` take it once the server has accepted and its probe checked out (by the first
    reply, at the latest by the second), and close it when the stream finishes.
    """

    def __init__(self, channel: GrpcChannel, token: str, offer_shared_memory: bool = False):
        self._channel = channel
        self._due = {_START, _INITIAL_METADATA, _STATUS}
        self._status: errors.StreamBroken | None = None
        self.messages = Messages()
        metadata = ((TOKEN_METADATA_KEY, token),)
        probe = memory_files.local_probe() if offer_shared_memory else None
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

    def exchange(self, chunks: list, caller_waits: bool = False, calls: int = 1) -> bytes:
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

    def finish(self) -> errors.StreamBroken:
        """Cancels the stream and waits until nothing of it is outstanding (driver only);
        returns why it ended."""
        if self._due:
            self.cancel()
        while self._due:
            self._next_event()
        self.messages.close()
        return self._status or errors.StreamBroken(None, "the stream was cancelled")

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
            self._status = errors.StreamBroken(None, "the wait for the stream was interrupted")
            raise
        self._due.discard(event.tag)
        if event.tag == _INITIAL_METADATA and event.success:
            self._accept_lane(event)
        elif event.tag == _STATUS:
            for operation in event.batch_operations:
                if operation.type() == cygrpc.OperationType.receive_status_on_client:
                    self._status = errors.StreamBroken(status_of_core(operation.code()),
                                                       operation.details() or "")
        return event

    def _accept_lane(self, event) -> None:
        for operation in event.batch_operations:
            if operation.type() == cygrpc.OperationType.receive_initial_metadata:
                answer = metadata_value(operation.initial_metadata(),
                                        SHARED_MEMORY_METADATA_KEY)
                peer = memory_files.verify_probe(answer) if answer else None
                if peer is not None:
                    self.messages.lane = lanes.Lane(peer)
