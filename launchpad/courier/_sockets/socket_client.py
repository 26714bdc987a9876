"""The socket transports' client side: channels to a server's Unix socket (this host) or
its TCP port (another host), and their streams.

See unix_sockets.py for the transport, its sockets and who may use them, and
tcp_sockets.py for its records over TCP. Each stream is a connection of its own; its hello
travels with its first message.

A client polls for its reply for `_REPLY_SPIN_SECS` before it blocks (and a server's stream
for the next message, socket_server.py): two processes on two CPUs of a virtual machine
otherwise pay a halted CPU's wake-up (~35 us here) on every message. A small call took
110 us instead of 40 when the kernel put client and server on two CPUs; polling brings it to
about 32 us either way, for at most these microseconds of CPU per message. It polls only
for the reply to a message of one call: a message of many (futures in flight) pays one
wake-up for all of them, and a poll would hold the interpreter that the thread queuing the
next calls needs (16 futures in flight: the client's CPU per call from 30 to 23 us; 64: 37k
calls/s instead of 30k).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable

from absl import logging

from launchpad.courier import errors
from launchpad.courier._process import hosts
from launchpad.courier._shared_memory import lanes, memory_files
from launchpad.courier._sockets import records, socket_wire, tcp_sockets, unix_sockets
from launchpad.courier._status import Status
from launchpad.courier._wire.messages import Messages
from launchpad.courier.tls import TLS

_CONNECT_SECS = 1.0
# A stream answered this recently is taken to be alive without a system call (see alive()).
_FRESH_SECS = 0.01
_REPLY_SPIN_SECS = 100e-6


class _SocketChannel:
    """What the socket channels share (streams.Channel): a stream per connection, the
    first of them made when the channel was found; a server that is gone refuses the next
    connection at once, so a channel is always ready."""

    kind = ""
    selectable = True

    def __init__(self, first: socket.socket, connect: Callable[[], socket.socket]):
        self._first: socket.socket | None = first
        self._connect = connect  # a new connection to the server

    def wait_until_ready(self, timeout: float) -> bool:
        return True

    def is_ready(self) -> bool:
        return True

    def connect_failure(self) -> str:
        return ""

    def open_stream(self, token: str, offer_shared_memory: bool = False) -> SocketStream:
        """A stream on a new connection (the first one made when the channel was found).

        Raises:
          errors.StreamBroken: the server does not accept connections.
        """
        first, self._first = self._first, None
        try:
            sock = first or self._connect()
        except OSError as e:
            raise errors.StreamBroken(Status.UNAVAILABLE,
                                      f"cannot connect to {self}: {e}") from e
        return SocketStream(sock, token, offer_shared_memory and self.kind == "local")

    def close(self) -> None:
        if self._first is not None:
            self._first.close()
            self._first = None


class UnixChannel(_SocketChannel):
    """The way to a server of this host through its Unix socket."""

    kind = "local"

    def __init__(self, path: str, first: socket.socket):
        super().__init__(first, lambda: _connect(path))
        self._path = path

    def __str__(self) -> str:
        return self._path

    @classmethod
    def find(cls, address: str, tls: TLS | None) -> UnixChannel | None:
        """A channel to the server at `address` if it listens on this host's socket of
        that address (and TLS), else None."""
        directory = unix_sockets.socket_dir()
        if directory is None:
            return None
        for host, port in hosts.keys(address):
            path = unix_sockets.socket_path(directory, host, port, tls)
            try:
                return cls(path, _connect(path))
            except OSError:
                continue
        return None

    def reachable(self) -> bool:
        """Whether the server still listens on its socket (unix_sockets.listening)."""
        return unix_sockets.listening(self._path)


class TcpChannel(_SocketChannel):
    """The way to a server of another host through the TCP port it offers (tcp_sockets.py)."""

    kind = "tcp"

    def __init__(self, host: str, port: int, first: socket.socket):
        super().__init__(first, lambda: tcp_sockets.connect(host, port, _CONNECT_SECS))
        self._host = host
        self._port = port

    def __str__(self) -> str:
        return f"{self._host}:{self._port} (TCP)"

    @classmethod
    def offered(cls, address: str, grpc_channel) -> TcpChannel | None:
        """A channel to the TCP port that the server at `address` offers through
        `grpc_channel` (up), if it offers one and it can be reached from here, else None."""
        port = grpc_channel.offered_tcp_port()
        if port is None:
            return None
        host = address.rpartition(":")[0]
        try:
            return cls(host, port, tcp_sockets.connect(host, port, _CONNECT_SECS))
        except OSError as e:
            logging.log_first_n(logging.WARNING, "Courier server at %s offers TCP port %d, "
                                "which cannot be reached from here (%s); its calls go "
                                "through gRPC", 5, address, port, e)
            return None

    def reachable(self) -> bool:
        """Whether the server still accepts connections on its port."""
        return tcp_sockets.listening(self._host, self._port, _CONNECT_SECS)


def _connect(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(_CONNECT_SECS)
        sock.connect(path)
        sock.settimeout(None)
        if unix_sockets.peer_uid(sock) != os.getuid():
            raise PermissionError(f"{path} is served by another user")
        return sock
    except BaseException:
        sock.close()
        raise


class SocketStream:
    """One stream on its own socket connection (streams.SelectableStream)."""

    def __init__(self, sock: socket.socket, token: str, offer_shared_memory: bool):
        self.messages = Messages()
        self._sock = sock
        self._reader = records.Reader(sock, max_length=socket_wire.MAX_MESSAGE)
        self._reader.spin_secs = _REPLY_SPIN_SECS
        probe = (memory_files.local_probe() or "") if offer_shared_memory else ""
        self._hello: bytes | None = socket_wire.hello(token, probe)
        self._answer_due = False
        self._status: errors.StreamBroken | None = None
        self._cancelled = False
        self._closed = False
        self._answered_at = 0.0

    def exchange(self, chunks: list, caller_waits: bool = False,
                 calls: int = 1) -> bytes | memoryview:
        """Sends a message and waits for its first reply, polling for it first (see the
        module doc) only if the message holds one call."""
        self.send(chunks)
        self._reader.spin_secs = _REPLY_SPIN_SECS if calls == 1 else 0.0
        return self.receive()

    def send(self, chunks: list) -> None:
        """Sends one message without waiting for its reply (streams.SelectableStream)."""
        if self._status is not None:
            raise self._status
        hello, self._hello = self._hello, None
        try:
            if hello is not None:  # the hello travels with the first message
                records.send_records(self._sock, [(socket_wire.HELLO, [hello]),
                                                  (socket_wire.MESSAGE, chunks)])
            else:
                records.send(self._sock, socket_wire.MESSAGE, chunks)
        except OSError as e:
            # The server may have ended the stream first (e.g. refused the token): its
            # status is then waiting to be read.
            raise self._status_left() or self._lost(f"the send failed: {e}") from None
        self._answer_due = hello is not None

    def receive(self) -> bytes | memoryview:
        if self._answer_due:  # the server's answer to the hello comes first
            self._answer_due = False
            self._read_answer()
        kind, body = self._read()
        if kind == socket_wire.MESSAGE:
            self._answered_at = time.monotonic()
            return body
        raise self._ended(kind, body)

    def receive_if_ready(self) -> bytes | memoryview | None:
        """The next reply, once its socket is readable; None if what had come was only the
        server's answer to the hello (read here), the reply not yet begun."""
        if self._answer_due:
            self._answer_due = False
            self._read_answer()
            try:
                if not self._reader.ready(0.0):
                    return None
            except OSError:
                pass  # receive() says how the stream ended
        return self.receive()

    def fileno(self) -> int:
        """The socket, readable when a reply begins to arrive (or the stream ends)."""
        return self._sock.fileno()

    def alive(self) -> bool:
        """Whether the server has not ended the stream: a non-blocking peek, skipped for a
        stream answered moments ago (a system call per call costs a GIL hand-off between
        busy threads; a server gone in that moment fails the call as gRPC's would)."""
        if self._status is not None or self._closed:
            return False
        if time.monotonic() - self._answered_at < _FRESH_SECS:
            return True
        try:
            self._sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            return False  # the end of the connection, or the server's status: it ended
        except BlockingIOError:
            return True  # nothing to read: the connection is up and the stream idle
        except OSError:
            return False

    def cancel(self) -> None:
        self._cancelled = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # a wait for a reply ends at once
        except OSError:
            pass

    def finish(self) -> errors.StreamBroken:
        if not self._closed:
            self._closed = True
            if self._status is None:
                self._status = errors.StreamBroken(Status.CANCELLED,
                                                   "the stream was cancelled")
            self.cancel()
            self._sock.close()
            self.messages.close()
        return self._status or errors.StreamBroken(None, "the stream was cancelled")

    def _read_answer(self) -> None:
        kind, body = self._read()
        if kind != socket_wire.ANSWER:
            raise self._ended(kind, body)
        answer = bytes(body).decode(errors="replace")  # (not a probe then: no lane)
        peer = memory_files.verify_probe(answer) if answer else None
        if peer is not None:
            self.messages.lane = lanes.Lane(peer)

    def _status_left(self) -> errors.StreamBroken | None:
        """The status the server sent before it closed the connection, if any."""
        try:
            self._sock.setblocking(False)
            kind, body = self._reader.read()
        except (EOFError, OSError, ValueError):
            return None
        return self._ended(kind, body) if kind == socket_wire.STATUS else None

    def _read(self) -> tuple[int, bytes | memoryview]:
        try:
            return self._reader.read()
        except (EOFError, OSError, ValueError) as e:
            raise self._lost(f"the connection to the server ended ({e})") from None

    def _ended(self, kind: int, body: bytes | memoryview) -> errors.StreamBroken:
        if kind != socket_wire.STATUS or not body:
            return self._broken(Status.INTERNAL, f"unexpected record kind {kind}")
        return self._broken(*socket_wire.status_of(bytes(body)))

    def _lost(self, details: str) -> errors.StreamBroken:
        if self._cancelled or self._closed:
            return self._broken(Status.CANCELLED, "the stream was cancelled")
        return self._broken(Status.UNAVAILABLE, details)

    def _broken(self, code: Status, details: str) -> errors.StreamBroken:
        if self._status is None:
            self._status = errors.StreamBroken(code, details)
        self.finish()
        return self._status
