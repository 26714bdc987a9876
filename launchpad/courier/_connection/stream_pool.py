"""A connection's streams (connection.py): every one open on its channel, the idle ones among
them, and how a call gets one: an idle stream still alive, else a new one.

The pool holds no lock of its own: its connection's lock guards it, held around every call
of these methods.
"""

from __future__ import annotations

from launchpad.courier import errors
from launchpad.courier._connection.dialer import Dialer
from launchpad.courier._connection.in_flight import PooledStream
from launchpad.courier._shared_memory import lanes
from launchpad.courier._wire import streams


class StreamPool:
    """The streams of one connection; `channel` is set once the connection has reached its
    server (before that the pool is empty and no stream is asked of it)."""

    def __init__(self, token: str, wait_for_ready: bool, dialer: Dialer):
        self.channel: streams.Channel | None = None
        self.idle: list[PooledStream] = []
        self.streams: set[PooledStream] = set()  # every stream open, idle or in use
        self._token = token
        self._wait_for_ready = wait_for_ready
        self._dialer = dialer  # (for the address its channel reached)

    def take(self, dead: list[PooledStream]) -> PooledStream | None:
        """An idle stream still alive, else a new one; None when the server is gone. Idle
        streams found dead are forgotten and added to `dead`, for the caller to let go of
        (PooledStream.let_go) once it has released the lock. Without wait_for_ready the
        channel may not have connected yet: its streams fail fast by themselves, unchecked."""
        while self.idle:
            stream = self.idle.pop()
            if not self._wait_for_ready or stream.transport.alive():
                return stream
            self.streams.discard(stream)
            dead.append(stream)
        return self.open()

    def open(self) -> PooledStream | None:
        """A new stream; None when the server is gone. To a server of this host, its lane
        may carry large parts through shared memory."""
        if self._wait_for_ready and not self.channel.is_ready():
            return None
        kind = self.channel.kind
        share = lanes.enabled() and (
            kind == "local"
            or (kind == "grpc" and lanes.is_same_host(self._dialer.address)))
        try:
            stream = PooledStream(self.channel.open_stream(self._token,
                                                           offer_shared_memory=share))
        except errors.StreamBroken:  # e.g. a local server's socket that is gone
            return None
        self.streams.add(stream)
        return stream
