"""Reaching a courier server: its address resolved, a channel opened and waited for.

A connection (connection.py) dials once, on a thread of its own, before its first stream.
The channel is the fastest transport that reaches the server (channels.py): the server
itself when it is in this process, its Unix socket when it is on this host, gRPC otherwise,
which, once it answers, hands over to a faster way if there is one: this host's (the server
was starting) or the TCP port the server offers. While gRPC does not answer, this host's ways
are looked for again after each wait (a server of this host's clients alone has no gRPC). The
wait is bounded by the client's connect_timeout.
"""

from __future__ import annotations

import threading
import time

from launchpad.courier import errors
from launchpad.courier._connection import channels
from launchpad.courier._wire import streams
from launchpad.courier.tls import TLS

# While a resolved address does not answer, it is resolved again: first after
# _FIRST_RESOLVE_AGAIN_SECS, then after twice as long each time, up to _RESOLVE_AGAIN_SECS.
# A client whose server was just killed may be given its old address once more (the
# controller forgets it only when it sees the process end, a few ms later); the short first
# wait finds the restarted server's address as soon as it is registered, not half a second on.
_FIRST_RESOLVE_AGAIN_SECS = 0.01
_RESOLVE_AGAIN_SECS = 0.5
# A channel is waited for in slices of at most this long, so that a dial its connection no
# longer wants (the client was closed) ends soon after.
_SLICE_SECS = 0.5


class Dialer:
    """Opens the channel to one server: `target` is 'host:port' or a resolver (client.py's
    AddressResolver); `address` is the one given, or the last one resolved ("" before)."""

    def __init__(self, target, wait_for_ready: bool, connect_timeout: float | None,
                 compress: bool, tls: TLS | None, mode: str):
        self.address = target if isinstance(target, str) else ""
        self._target = target
        self._wait_for_ready = wait_for_ready
        self._connect_timeout = connect_timeout
        self._compress = compress
        self._tls = tls
        self._mode = mode
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        """Ends a dial under way (its connection was closed): it raises ClientClosedError
        within _SLICE_SECS."""
        self._cancelled.set()

    def dial(self) -> streams.Channel:
        """A channel to the server, connected unless wait_for_ready is off (then calls fail
        at once if the server is not there). A resolved address is resolved again while the
        server cannot be reached: its node may have moved (restarted) or ended (the resolver
        then raises, and that error is the calls' error).

        Raises:
          errors.ServerUnavailableError: the server was not reachable within
            connect_timeout; or whatever the resolver raised.
        """
        if not self._wait_for_ready:
            if not isinstance(self._target, str):
                self.address = self._target.resolve(0.0)
            return self._new_channel()
        timeout = self._connect_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        channel, channel_address = None, None
        resolve_again = _FIRST_RESOLVE_AGAIN_SECS
        try:
            while True:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not isinstance(self._target, str):
                    self.address = self._target.resolve(1e9 if remaining is None else remaining)
                if channel_address != self.address:  # a channel keeps trying its address
                    if channel is not None:
                        channel.close()
                    channel = self._new_channel()
                    channel_address = self.address
                attempt = _SLICE_SECS if remaining is None else min(remaining, _SLICE_SECS)
                if not isinstance(self._target, str):
                    attempt = min(attempt, resolve_again)
                    resolve_again = min(2 * resolve_again, _RESOLVE_AGAIN_SECS)
                if channel.wait_until_ready(attempt):
                    ready, channel = channels.faster(channel, self.address, self._tls,
                                                      self._mode, self._compress), None
                    return ready
                found = channels.fast_channel(self.address, self._tls, self._mode)
                if found is not None:  # a server that came up meanwhile, maybe without gRPC
                    return found
                if self._cancelled.is_set():
                    raise errors.ClientClosedError(
                        f"The client of {self.address} was closed while it connected")
                if deadline is not None and time.monotonic() >= deadline:
                    raise self._unreachable(channel)
        finally:
            if channel is not None:
                channel.close()

    def _new_channel(self) -> streams.Channel:
        return channels.open_channel(self.address, compress=self._compress, tls=self._tls,
                                      mode=self._mode)

    def _unreachable(self, channel: streams.Channel) -> errors.ServerUnavailableError:
        """The error of calls that waited connect_timeout in vain, with gRPC's reason (over
        TLS, that names what the handshake refused: a certificate, or a peer without TLS)."""
        over = " over TLS" if self._tls is not None else ""
        reason = channel.connect_failure()
        return errors.ServerUnavailableError(
            f"Courier server at {self.address} was not reachable{over} within "
            f"connect_timeout={self._connect_timeout}s" + (f" ({reason})" if reason else ""))
