"""For a client, the fastest transport that reaches its server.

A courier server is reachable four ways (_serving/endpoints.py): through gRPC on its port (from any
host), through a TCP port of its own carrying courier's records (tcp_sockets.py; from any
host, when the server has no TLS), through a Unix socket (unix_sockets.py, from its own
host) and directly (in_process.py, from its own process). A client opens the fastest channel
that reaches the server it names (`open_channel`): in-process, else local, else gRPC, which,
once up, tells it the TCP port to go on with (`faster`). The semantics are the same on each
(the same messages, errors, timeouts, cancellation and token); only the cost differs.

The choice can be narrowed, per client (`Client(transport=...)`) or per process (the
environment variable `LAUNCHPAD_COURIER_TRANSPORT`): `auto` (the default) as above, `local`
never in-process (a socket even to a server of this process), `tcp` the TCP port even on
this host (as a client of another host would), `grpc` gRPC everywhere, for debugging and
for comparison.
"""

from __future__ import annotations

import os

from launchpad.courier._grpc import grpc_client
from launchpad.courier._in_process import in_process
from launchpad.courier._sockets.socket_client import TcpChannel, UnixChannel
from launchpad.courier._wire import streams
from launchpad.courier.tls import TLS

ENV_TRANSPORT = "LAUNCHPAD_COURIER_TRANSPORT"
MODES = ("auto", "local", "tcp", "grpc")


def mode_of(option: str | None) -> str:
    """The transport mode a client uses: `option`, else the environment's, else auto.

    Raises:
      ValueError: the option or the environment variable is not one of MODES.
    """
    if option is not None:
        if option not in MODES:
            raise ValueError(f"transport must be one of {', '.join(MODES)}; got {option!r}")
        return option
    value = os.environ.get(ENV_TRANSPORT, "").strip().lower() or "auto"
    if value not in MODES:
        raise ValueError(f"{ENV_TRANSPORT} must be one of {', '.join(MODES)}; got {value!r}")
    return value


def fast_channel(address: str, tls: TLS | None, mode: str) -> streams.Channel | None:
    """A channel to the server at `address` that avoids gRPC, if one reaches it now."""
    if mode == "auto":
        found = in_process.InProcessChannel.find(address, tls)
        if found is not None:
            return found
    if mode in ("auto", "local"):
        return UnixChannel.find(address, tls)
    return None


def open_channel(address: str, *, compress: bool = False, tls: TLS | None = None,
                 mode: str = "auto") -> streams.Channel:
    """The fastest channel to the server at `address` there is now (gRPC if no other)."""
    return (fast_channel(address, tls, mode)
            or grpc_client.GrpcChannel(address, compress, tls))


def faster(channel: streams.Channel, address: str, tls: TLS | None, mode: str,
           compress: bool = False) -> streams.Channel:
    """`channel`, or, for a gRPC channel that has just come up, a faster way to its server
    if there is one now: a transport of this host (the server was starting when the channel
    was opened), else the TCP port the server offers. A compressing client stays on gRPC,
    which does the compressing."""
    if channel.kind != "grpc":
        return channel
    found = fast_channel(address, tls, mode)
    if found is None and mode != "grpc" and tls is None and not compress:
        found = TcpChannel.offered(address, channel)
    if found is None:
        return channel
    channel.close()
    return found
