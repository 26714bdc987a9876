"""The baselines' clients, shaped like a courier client so one set of loops measures all.

`rpc_program.measure` calls `client.ping(x)`, `client.as_array(data)` and
`client.futures.ping(x)`, and pickles a client to get another with a connection of its own.
These do the same with the least a caller of each baseline must do:

* `SocketClient`: a raw length-prefixed echo over TCP (_socket_server.py), the floor: bytes
  out and back, an array as its bytes and back as a view of them; no futures (a raw socket
  has no way to keep calls in flight but one thread per call).
* `GrpcClient`: raw grpcio unary calls (_rawgrpc_server.py), bytes in and out, no
  (de)serializers: what gRPC alone costs per call; its futures are grpcio's.
"""

from __future__ import annotations

import abc
import socket
from typing import Any

import grpc
import numpy as np

from benchmarks import _rawgrpc_server
from benchmarks._socket_server import LENGTH, read_exactly
from launchpad import courier
from launchpad.courier._grpc import credentials


def _as_bytes(value: Any) -> bytes:
    if value is None:
        return b""
    return value.tobytes() if isinstance(value, np.ndarray) else value


class _EchoClient(abc.ABC):
    """What both baselines do with an echo of bytes (`_echo`): a value out and back, an
    array as its bytes and back as a view of them."""

    @abc.abstractmethod
    def _echo(self, data: bytes) -> bytes | bytearray:
        """Sends `data` and returns the bytes that come back: each baseline's round trip."""

    def ping(self, value: Any) -> Any:
        reply = self._echo(_as_bytes(value))
        return np.frombuffer(reply, value.dtype) if isinstance(value, np.ndarray) else reply

    def as_array(self, data: bytes) -> np.ndarray:
        return np.frombuffer(self._echo(data), np.float32)


class SocketClient(_EchoClient):
    """A client of the raw socket echo at `address` ('host:port')."""

    futures = None  # none: see the module doc
    one_thread_only = True  # one socket: threads cannot share it

    def __init__(self, address: str):
        self.address = address
        host, port = address.rsplit(":", 1)
        self._sock = socket.create_connection((host, int(port)))
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def __reduce__(self):
        return (SocketClient, (self.address,))

    def _echo(self, data: bytes) -> bytearray:
        self._sock.sendall(LENGTH.pack(len(data)) + data)
        (size,) = LENGTH.unpack(read_exactly(self._sock, LENGTH.size))
        return read_exactly(self._sock, size)

    def close(self) -> None:
        self._sock.close()


class _GrpcFutures:
    def __init__(self, stub: grpc.UnaryUnaryMultiCallable):
        self._stub = stub

    def ping(self, value: Any) -> grpc.Future:
        return self._stub.future(_as_bytes(value))


class GrpcClient(_EchoClient):
    """A client of the raw grpcio echo at `address`, over TLS with `tls`."""

    def __init__(self, address: str, tls: courier.TLS | None = None):
        self.address = address
        self._tls = tls
        if tls is None:
            self._channel = grpc.insecure_channel(address, options=_rawgrpc_server.OPTIONS)
        else:
            options = _rawgrpc_server.OPTIONS + [
                ("grpc.ssl_target_name_override", tls.server_name)]
            self._channel = grpc.secure_channel(
                address, credentials.channel_credentials(tls), options)
        grpc.channel_ready_future(self._channel).result(timeout=30)
        self._stub = self._channel.unary_unary(_rawgrpc_server.METHOD_PATH)
        self.futures = _GrpcFutures(self._stub)

    def __reduce__(self):
        return (GrpcClient, (self.address, self._tls))

    def _echo(self, data: bytes) -> bytes:
        return self._stub(data)

    def close(self) -> None:
        self._channel.close()
