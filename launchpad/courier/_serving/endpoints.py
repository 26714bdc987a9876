"""A server's listeners on every transport at once, bound together to one port.

A courier server is reachable four ways: through gRPC on its port (from any host), through a
TCP port of its own carrying courier's records (_sockets/tcp_sockets.py; from any host, when
the server has no TLS), through a Unix socket (_sockets/unix_sockets.py, from its own host)
and directly (_in_process/in_process.py, from its own process). Clients choose among them
(_connection/channels.py).
"""

from __future__ import annotations

from typing import Protocol

from launchpad.courier._connection.channels import mode_of
from launchpad.courier._grpc import grpc_server
from launchpad.courier._in_process import in_process
from launchpad.courier._sockets import socket_server, tcp_sockets
from launchpad.courier._wire import streams
from launchpad.courier.tls import TLS

# How long a stopping server's gRPC streams live on, every reply sent, so that the last
# replies leave before the streams are cancelled (a stream with no RPC left ends at once).
_GRPC_FLUSH_SECS = 0.2


class Served(in_process.Target, streams.SocketService, Protocol):
    """What a server offers each transport's streams (server.py implements it)."""


class Endpoints:
    """One server's listeners on every transport, bound together to one port.

    The gRPC port is bound first (it picks the port); the local socket and the in-process
    entry are in place before gRPC accepts anything, so a client that reached the server
    through gRPC finds the faster ways too.

    A server for this host's clients alone (`local_only`: a node of a local launch) starts
    no gRPC server, whose core costs each node process threads and memory (100 nodes of
    local_mp: 612-614 MB PSS with it, 574-584 without), and no TCP port. Its port is held
    (tcp_sockets.hold) so that its address stays its own, and a gRPC client is refused at
    once. Where this host has no socket directory, or `LAUNCHPAD_COURIER_TRANSPORT` asks for
    gRPC or TCP (whose clients would not reach it), it serves them all after all.
    """

    def __init__(self, target: Served, host: str, port: int, tls: TLS | None,
                 local_only: bool = False):
        self._host = host
        self._target = target
        self._grpc: grpc_server.GrpcServer | None = None
        self._held = self._sockets = None
        if local_only and mode_of(None) in ("auto", "local"):
            self._held = tcp_sockets.hold(host, port)
            self.port = self._held.getsockname()[1]
            self._sockets = socket_server.SocketServer.bind(target, host, self.port, tls,
                                                          tcp=False)
            if self._sockets is None:  # no socket directory: every transport after all
                self._held.close()
                self._held = None
        if self._held is None:
            self._grpc = grpc_server.GrpcServer(target, host, port, tls)
            self.port = self._grpc.port
            self._sockets = socket_server.SocketServer.bind(target, host, self.port, tls)
        if self._sockets is not None:
            self._sockets.start()
            if self._grpc is not None:
                self._grpc.tcp_port = self._sockets.port
        in_process.register(host, self.port, tls, target)
        if self._grpc is not None:
            self._grpc.start()

    def refuse_new_streams(self) -> None:
        """Leaves the in-process registry, closes the Unix socket and the TCP port and no
        longer offers that port (streams already open go on): a client then finds the server
        gone and resolves its name afresh, where a stream opened on a stopping server would
        only be ended, failing its call. gRPC keeps accepting until stop(), which is how it
        stops gracefully."""
        in_process.unregister(self._host, self.port, self._target)
        if self._grpc is not None:
            self._grpc.tcp_port = None
        if self._sockets is not None:
            self._sockets.stop()

    def stop(self) -> None:
        """Stops accepting on every transport, then stops gRPC: its streams end after
        `_GRPC_FLUSH_SECS`, time for what they sent to go out (streams.Peer.cancel)."""
        self.refuse_new_streams()
        if self._grpc is not None:
            self._grpc.stop(grace=_GRPC_FLUSH_SECS)
        if self._held is not None:
            self._held.close()
