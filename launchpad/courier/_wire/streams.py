"""What every courier transport provides, and how a stream's end becomes a courier error.

A transport carries courier messages (serialization.py) on long-lived streams, one message
each way per exchange. The client side of each transport has a `Channel` that opens
`ClientStream`s; the server side hands each stream it accepts to the server's handler with a
`Peer`, the server's view of the client at its other end. Three transports implement these
(channels.py chooses among them per connection): in_process.py, the local socket
(socket_server.py and socket_client.py) and grpc_client.py.

A stream ends with a status code (_status.py) and details whatever its transport
(errors.StreamBroken), so that callers map the end of a stream to one courier error in one
place (`error_for_broken_stream`).
"""

from __future__ import annotations

import queue
from collections.abc import Iterator
from typing import NoReturn, Protocol

from launchpad.courier import errors
from launchpad.courier._status import Status
from launchpad.courier._wire.messages import Messages

# The details of a stream refused for a missing or wrong token, on every transport.
REFUSED_DETAILS = "courier: missing or wrong secret token"


class ClientStream(Protocol):
    """One stream, driven by one thread at a time (see grpc_client.Stream for the rules).

    `exchange` sends a message (a list of chunks, joined or scattered as the transport
    likes) of `calls` calls and waits for the first reply; `receive` waits for a further
    one. With `caller_waits`, the calling thread does nothing but wait for this reply, and a
    transport in this process may run the call on it. `alive` says, cheaply, whether an idle stream
    (every reply read, nobody driving it) can still be used; it must not be asked of a
    stream in use, whose reply waiting to be read may look like its end. Any thread may
    `cancel`; the owner `finish`es. `messages` packs and unpacks its messages, through its
    shared-memory lane if it has one (which it closes as it finishes).
    """

    messages: Messages

    def exchange(self, chunks: list, caller_waits: bool = False,
                 calls: int = 1) -> bytes | memoryview: ...

    def receive(self) -> bytes | memoryview: ...

    def alive(self) -> bool: ...

    def cancel(self) -> None: ...

    def finish(self) -> errors.StreamBroken: ...


class SelectableStream(ClientStream, Protocol):
    """A stream on a socket (the local and TCP transports'): a thread may `send` a message
    on it and read the reply later (`receive_if_ready`, None until the reply itself has
    begun to come), once `fileno()` is readable. A group call
    sends every member's message so and waits on all their sockets at once
    (connection.StartedCall)."""

    def send(self, chunks: list) -> None: ...

    def receive_if_ready(self) -> bytes | memoryview | None: ...

    def fileno(self) -> int: ...


class Channel(Protocol):
    """A client's way to one server over one transport (`kind` names it).

    `is_ready` says, at no cost, whether a stream opened now could work (a transport whose
    streams fail at once on a server that is gone may always say so); `reachable` says
    whether the server is still there, at the cost of asking it: what a stream that ended
    while idle asks, to tell a server that ended that stream from one that is gone.
    """

    kind: str
    selectable: bool  # its streams are SelectableStreams

    def wait_until_ready(self, timeout: float) -> bool: ...

    def is_ready(self) -> bool: ...

    def reachable(self) -> bool: ...

    def connect_failure(self) -> str: ...

    def open_stream(self, token: str, offer_shared_memory: bool = False) -> ClientStream: ...

    def close(self) -> None: ...


class Peer(Protocol):
    """The server's view of the client at the other end of one stream: its token, and
    its `messages`, through the shared-memory lane it accepts if the client offered one
    (closed by its transport when the stream ends)."""

    token: str
    messages: Messages

    def accept_shared_memory(self) -> None: ...

    def abort(self, code: Status, details: str) -> NoReturn: ...

    def cancel(self) -> None:
        """Ends the stream as its server stops, every reply to it sent: once those have
        gone out (a transport may leave that to the stop of its listener)."""


def error_for_broken_stream(error: errors.StreamBroken, address: str) -> errors.CourierError:
    """Maps the status that ended a stream to the courier error of the calls on it."""
    if error.code == Status.PERMISSION_DENIED:
        return errors.PermissionDeniedError(
            f"Courier server at {address} refused the call: missing or wrong secret token "
            "(is the client from another program or launch?)")
    if error.code == Status.OK:
        return errors.ServerUnavailableError(f"Courier server at {address} closed the connection")
    return errors.ServerUnavailableError(
        f"Courier server at {address} is unreachable or went away before answering ({error})")


class SocketService(Protocol):
    """What a server offers the streams of a socket transport, one message at a time
    (_serving/dispatcher.py implements it; socket_server.py and grpc_server.py use it)."""

    def open_socket_stream(self, peer: Peer) -> None:
        """Takes a new stream, or aborts it (errors.PeerAborted) if its token is wrong."""

    def socket_replies(self, peer: Peer, message: bytes | memoryview,
                       outbox: queue.SimpleQueue) -> Iterator[tuple[list, bool]]:
        """Each reply's chunks, and whether it is the last reply to this message."""

    def detach(self, peer: Peer) -> None:
        """Forgets a stream that ended."""
