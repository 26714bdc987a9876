"""The gRPC transport behind courier, kept in one module so it can be replaced.

Every client connection is one long-lived bidirectional gRPC stream. Both directions carry
messages made of one or more frames (see serialization.py); calls are matched to results by id,
so many calls can be in flight on one stream and calls queued together travel as one message.
One message each way per call is what makes a stream cheaper than a unary gRPC call in Python
(see shared/notes/STACK.md); coalescing is what makes it cheaper still under load.

The secret token travels as call metadata when the stream opens: a stream without the right
token is aborted before any message on it is read, so nothing from an unauthenticated peer is
ever unpickled.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Iterator

import grpc

from launchpad.courier import errors

STREAM_METHOD = "/launchpad.courier.Courier/Stream"
TOKEN_METADATA_KEY = "x-courier-token"

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
_SERVER_OPTIONS = _MESSAGE_OPTIONS + [
    # Without this gRPC sets SO_REUSEPORT and two servers silently share one port.
    ("grpc.so_reuseport", 0),
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 5_000),
    ("grpc.http2.max_ping_strikes", 0),
    ("grpc.keepalive_permit_without_calls", 1),
]
# Each open stream holds one of these threads for its lifetime; handlers run elsewhere.
_MAX_STREAMS = 4096

StreamHandler = Callable[[Iterator[bytes], grpc.ServicerContext], Iterator[bytes]]


class GrpcServer:
    """A started gRPC server and the threads that run its streams."""

    def __init__(self, server: grpc.Server, pool: concurrent.futures.ThreadPoolExecutor,
                 port: int):
        self.port = port
        self._server = server
        self._pool = pool

    def stop(self, grace: float | None) -> None:
        self._server.stop(grace).wait()
        # Stream threads run calls: one stuck in user code must not hold up the stop (a
        # thread cannot be killed); it ends when its call returns.
        self._pool.shutdown(wait=False)


def start_server(handler: StreamHandler, host: str, port: int) -> GrpcServer:
    """Starts a gRPC server whose only method is the courier stream."""
    method = grpc.stream_stream_rpc_method_handler(handler)
    service = grpc.method_handlers_generic_handler(
        STREAM_METHOD.split("/")[1], {STREAM_METHOD.split("/")[2]: method})
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=_MAX_STREAMS,
                                                 thread_name_prefix="courier-stream")
    server = grpc.server(pool, handlers=[service], options=_SERVER_OPTIONS)
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        bound = server.add_insecure_port(target)
    except RuntimeError as e:
        pool.shutdown()
        raise errors.AddressInUseError(f"Cannot bind a courier server to {target}: {e}") from e
    if bound == 0:
        pool.shutdown()
        raise errors.AddressInUseError(
            f"Cannot bind a courier server to {target}: the port is in use or not available")
    server.start()
    return GrpcServer(server, pool, bound)


def token_of(context: grpc.ServicerContext) -> str:
    for key, value in context.invocation_metadata():
        if key == TOKEN_METADATA_KEY:
            return value
    return ""


def refuse(context: grpc.ServicerContext) -> None:
    context.abort(grpc.StatusCode.PERMISSION_DENIED, "courier: missing or wrong secret token")


def open_channel(address: str, compress: bool) -> grpc.Channel:
    compression = grpc.Compression.Gzip if compress else None
    return grpc.insecure_channel(address, options=_CLIENT_OPTIONS, compression=compression)


def wait_until_ready(channel: grpc.Channel, timeout: float) -> bool:
    """Waits up to `timeout` seconds for the channel to connect; True if it did."""
    ready = grpc.channel_ready_future(channel)
    try:
        ready.result(timeout=timeout)
        return True
    except grpc.FutureTimeoutError:
        ready.cancel()  # stops its polling thread before the caller closes the channel
        return False


def open_stream(channel: grpc.Channel, requests: Iterator[bytes], token: str) -> Iterator[bytes]:
    """Opens the courier stream; the result iterates over response messages and can cancel().

    Streams never wait for the channel to be ready: the connection waits (bounded) before it
    opens any, and a stream opened after its server went away must fail, not wait forever
    for a server that may never come back.
    """
    stream = channel.stream_stream(STREAM_METHOD)
    return stream(requests, metadata=((TOKEN_METADATA_KEY, token),), wait_for_ready=False)


def error_for_broken_stream(error: grpc.RpcError, address: str) -> errors.CourierError:
    """Maps the status that ended a stream to the courier error of the calls still in flight."""
    code = error.code() if hasattr(error, "code") else None
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return errors.PermissionDeniedError(
            f"Courier server at {address} refused the call: missing or wrong secret token "
            "(is the client from another program or launch?)")
    details = error.details() if hasattr(error, "details") else str(error)
    return errors.ServerUnavailableError(
        f"Courier server at {address} is unreachable or went away before answering "
        f"({code.name if code else 'unknown status'}: {details})")
