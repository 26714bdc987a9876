"""The in-process transport: a client of a server in its own process calls it directly.

Colocated nodes, local_mt programs and a launcher talking to its own nodes call servers of
their own process; a socket between two threads of one process costs two thread switches
and the GIL passed back and forth per call. Here a stream hands each message to the server
itself: the message is still the bytes of serialization.py (arguments and results are
copied through pickling, never shared, exactly as between processes), and the server runs
its calls as it does for any stream (_serving/dispatcher.py), with one difference: a
blocking call without a deadline runs on the calling thread itself, which costs no thread
switch at all, and skips the message altogether (direct_calls.py). A call with a deadline,
and every future, runs on the server's threads, so that a timeout, a cancellation or the
server's stop ends the caller's wait as on any transport.

Servers register here by the keys of their address (hosts.py) and their TLS, and leave
when they stop (and from a forked child, which serves none of them); a client of another TLS
(or none) does not find them and goes through gRPC.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator
from typing import NoReturn, Protocol

from launchpad.courier import errors
from launchpad.courier._in_process import direct_calls, forks
from launchpad.courier._process import hosts
from launchpad.courier._status import Status
from launchpad.courier._wire import streams
from launchpad.courier._wire.messages import Messages
from launchpad.courier.tls import TLS, tls_tag


class Target(direct_calls.Target, Protocol):
    """What a server offers its in-process streams and direct calls (_serving/dispatcher.py
    implements it)."""

    def attach(self, peer: streams.Peer) -> None: ...

    def detach(self, peer: streams.Peer) -> None: ...

    def in_process_replies(self, peer: streams.Peer, message: bytes, outbox: queue.SimpleQueue,
                           run_last_here: bool) -> Iterator[tuple[list, bool]]: ...


_lock = threading.Lock()
_servers: dict[tuple[str, int], tuple[Target, str]] = {}  # key -> server, its TLS's tag


def _forget_after_fork() -> None:
    """A forked child has copies of its parent's servers but serves none of them: its
    clients must reach the parent's servers through a socket, not these copies."""
    global _lock
    _lock = threading.Lock()
    _servers.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def register(host: str, port: int, tls: TLS | None, target: Target) -> None:
    with _lock:
        _servers[(hosts.normalize(host), port)] = (target, tls_tag(tls))


def unregister(host: str, port: int, target: Target) -> None:
    key = (hosts.normalize(host), port)
    with _lock:
        if _servers.get(key, (None,))[0] is target:
            del _servers[key]


class InProcessChannel:
    """The way to a server of this process (streams.Channel)."""

    kind = "in-process"
    selectable = False

    def __init__(self, target: Target):
        self._target = target

    @classmethod
    def find(cls, address: str, tls: TLS | None) -> InProcessChannel | None:
        tag = tls_tag(tls)
        keys = hosts.keys(address)  # (not under the lock: a host name is looked up)
        with _lock:
            for key in keys:
                found = _servers.get(key)
                if found is not None and found[1] == tag and found[0].serving():
                    return cls(found[0])
        return None

    def wait_until_ready(self, timeout: float) -> bool:
        return True

    def is_ready(self) -> bool:
        """Whether the server still serves: one that is stopping ends new streams at once,
        so a client must not take it for there (a node restarted under the same name has
        a new server, which a fresh resolution finds)."""
        return self.reachable()

    def reachable(self) -> bool:
        """Whether the server still serves in this process (a stopped one has left, a
        stopping one has stopped serving)."""
        with _lock:
            registered = any(target is self._target for target, _ in _servers.values())
        return registered and self._target.serving()

    def connect_failure(self) -> str:
        return ""

    def open_stream(self, token: str, offer_shared_memory: bool = False) -> InProcessStream:
        return InProcessStream(self._target, token)

    def direct_calls(self, token: str) -> direct_calls.DirectCalls:
        """Blocking calls made straight into the server (direct_calls.py)."""
        return direct_calls.DirectCalls(self._target, token)

    def close(self) -> None:
        pass


class InProcessStream:
    """A stream to a server of this process (streams.ClientStream); also the server's
    view of it (streams.Peer)."""

    def __init__(self, target: Target, token: str):
        self.token = token
        self.messages = Messages()  # never a lane: the message itself is the one copy
        self._forks = forks.count()  # made in this process, not a fork of it (alive)
        self._target = target
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._replies: Iterator[tuple[list, bool]] | None = None
        self._status: errors.StreamBroken | None = None
        if not target.accepts_token(token):
            self._status = errors.StreamBroken(Status.PERMISSION_DENIED,
                                               streams.REFUSED_DETAILS)
        else:
            target.attach(self)

    # ------------------------------------------------------------ the client's side

    def exchange(self, chunks: list, caller_waits: bool = False, calls: int = 1) -> bytes:
        if self._forks != forks.count():
            raise self._end(errors.StreamBroken(Status.UNAVAILABLE,
                                                "the stream was made before this process "
                                                "was forked"))
        if self._status is not None:
            raise self._status
        message = b"".join(chunks)  # the copy a socket would make: nothing is shared
        self._replies = self._target.in_process_replies(self, message, self._outbox,
                                                        run_last_here=caller_waits)
        return self.receive()

    def receive(self) -> bytes:
        if self._replies is None:  # no reply is due: the stream ended
            raise self._status or self.finish()
        try:
            reply, last = next(self._replies)
        except errors.PeerAborted as e:
            raise self._end(errors.StreamBroken(e.code, e.details)) from None
        except errors.StreamBroken as e:
            raise self._end(e) from None
        if self._status is not None:  # the server stopped while the call ran here
            raise self._status
        if last:
            self._replies = None
        return b"".join(reply)

    def alive(self) -> bool:
        """Whether the stream may carry calls: not ended, and not a copy a fork made (its
        server here is a copy that serves nobody)."""
        return self._status is None and self._forks == forks.count()

    def finish(self) -> errors.StreamBroken:
        return self._end(errors.StreamBroken(None, "the stream was cancelled"))

    # ------------------------------------------------------------ the server's side

    def accept_shared_memory(self) -> None:
        pass  # one address space: the message itself is the one copy

    def abort(self, code: Status, details: str) -> NoReturn:
        raise errors.PeerAborted(code, details)

    def cancel(self) -> None:
        """Ends the stream (its server stopping, or its client): a wait for a reply ends."""
        self._end(errors.StreamBroken(Status.CANCELLED, "the stream was cancelled"))

    def _end(self, status: errors.StreamBroken) -> errors.StreamBroken:
        if self._status is None:
            self._status = status
            self._outbox.put(None)  # wakes a wait for replies (replies.replies)
            self._target.detach(self)
        return self._status
