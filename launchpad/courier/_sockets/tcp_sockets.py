"""The TCP transport: the local transport's records between hosts, without gRPC.

Between hosts a courier call went through gRPC, whose per-message machinery in Python costs
several times a socket round trip, and whose core hands every message between its own
threads: at 10,000 nodes reporting through their host agents that was most of the
controller's CPU (docs/performance.md). So a courier server without TLS also listens on a
TCP port of its own, and serves there exactly what it serves on its Unix socket: the same
records (records.py), the same hello with the token checked before any message is read, the
same status that ends a stream (unix_sockets.py), on the same few threads (socket_server.py).
It accepts anyone's connection (as its gRPC port does: the token decides), and never a
shared-memory lane (a peer's memory files are not on this host).

A client learns the port from the server itself: once its gRPC channel is up, it asks
(`grpc_wire.OFFER_METHOD`, answered in the status's metadata) and opens its
streams on the TCP port from then on (socket_client.TcpChannel), through the same streams
the Unix socket's clients use. A server that offers none (it has TLS: those clients stay on
gRPC, whose handshake checks certificates), a port that cannot be reached from the client (a
firewall, a forwarded gRPC port) and `LAUNCHPAD_COURIER_TRANSPORT=grpc` leave the client on
gRPC.

Sockets carry small messages at once (`TCP_NODELAY`) and find a peer that vanished without
closing them (a host lost, a cut link) by TCP's keepalive within `KEEPALIVE_IDLE_SECS` plus
`KEEPALIVE_PROBES` probes `KEEPALIVE_INTERVAL_SECS` apart, about as fast as gRPC's
keepalive pings (20 s, then 10 s for the answer).
"""

from __future__ import annotations

import socket

KEEPALIVE_IDLE_SECS = 20
KEEPALIVE_INTERVAL_SECS = 5
KEEPALIVE_PROBES = 2
_USER_TIMEOUT_MS = (KEEPALIVE_IDLE_SECS + KEEPALIVE_PROBES * KEEPALIVE_INTERVAL_SECS) * 1000
_EVERY_INTERFACE = ("", "::", "*")  # IPv6 and IPv4 (0.0.0.0: IPv4 alone, as gRPC binds)


def listen(host: str, backlog: int) -> socket.socket:
    """A listening, non-blocking TCP socket on `host` (the interface a server's gRPC port is
    bound to) and a port the kernel picks."""
    family, address, dualstack = _interface(host)
    listener = socket.create_server((address, 0), family=family, backlog=backlog,
                                    dualstack_ipv6=dualstack)
    listener.setblocking(False)
    return listener


def hold(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `port` of `host` (0: one the kernel picks) and not listening: the
    port is this process's, and a client that tries it is refused at once (a server with no
    gRPC keeps its address this way: _serving/endpoints.py)."""
    family, address, dualstack = _interface(host)
    holder = socket.socket(family, socket.SOCK_STREAM)
    try:
        if dualstack:
            holder.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        holder.bind((address, port))
        return holder
    except BaseException:
        holder.close()
        raise


def _interface(host: str) -> tuple[socket.AddressFamily, str, bool]:
    """The family and address that bind `host` as gRPC binds it, and whether the socket
    takes IPv4 too (every interface, where this host has dual-stack IPv6)."""
    host = host.strip("[]")
    if host in _EVERY_INTERFACE:
        if socket.has_dualstack_ipv6():
            return socket.AF_INET6, "::", True
        return socket.AF_INET, "0.0.0.0", False
    return (socket.AF_INET6 if ":" in host else socket.AF_INET), host, False


def tune(connection: socket.socket) -> None:
    """Small messages leave at once; a vanished peer is found by keepalive probes."""
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE_IDLE_SECS)
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, KEEPALIVE_INTERVAL_SECS)
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, KEEPALIVE_PROBES)
    # Data sent and never acknowledged (the peer vanished mid-message) fails as soon.
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, _USER_TIMEOUT_MS)


def connect(host: str, port: int, timeout: float) -> socket.socket:
    """A tuned, blocking connection to host:port, made within `timeout` seconds.

    Raises:
      OSError: it was refused, unreachable, or not made in time.
    """
    sock = socket.create_connection((host.strip("[]"), port), timeout=timeout)
    try:
        sock.settimeout(None)
        tune(sock)
        return sock
    except BaseException:
        sock.close()
        raise


def listening(host: str, port: int, timeout: float) -> bool:
    """Whether a server accepts connections on host:port (one made and closed at once)."""
    try:
        socket.create_connection((host.strip("[]"), port), timeout=timeout).close()
        return True
    except OSError:
        return False
