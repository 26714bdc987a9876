"""One connection a socket server (socket_server.py) serves: its state while it greets, is
served or waits (`ServedStream`), and the server's view of its client (`SocketPeer`)."""

from __future__ import annotations

import queue
import select
import socket
from typing import NoReturn

from launchpad.courier import errors
from launchpad.courier._shared_memory import lanes, memory_files
from launchpad.courier._sockets import records, socket_wire
from launchpad.courier._status import Status
from launchpad.courier._wire.messages import Messages


class ServedStream:
    """One connection to the server: greeting, being served, or waiting for a message."""

    def __init__(self, connection: socket.socket, deadline: float, local: bool):
        self.connection = connection
        self.local = local  # on the Unix socket (else the TCP port)
        self.fd = connection.fileno()
        self.deadline = deadline  # for its hello
        self.epoll: select.epoll | None = None  # the one it is registered with
        self.reader = records.Reader(connection, max_length=socket_wire.HELLO_MAX)
        self.peer: SocketPeer | None = None  # once its token is accepted
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        self.replied = 0.0  # when the last reply was sent (perf_counter)
        self.hot = True  # whether its next message is likely to come within a poll


class SocketPeer:
    """The server's view of one socket stream (streams.Peer)."""

    def __init__(self, connection: socket.socket, token: str, probe: str):
        self.token = token
        self.messages = Messages()
        self.answer = ""  # this process's probe, once the client's lane is accepted
        self._connection = connection
        self._probe = probe

    def accept_shared_memory(self) -> None:
        """Takes the lane the client offered, if its probe is readable from here (then
        `answer` is this process's probe)."""
        if not self._probe or not lanes.enabled():
            return
        peer = memory_files.verify_probe(self._probe)
        if peer is not None:
            self.answer = memory_files.local_probe() or ""
            self.messages.lane = lanes.Lane(peer)

    def abort(self, code: Status, details: str) -> NoReturn:
        raise errors.PeerAborted(code, details)

    def cancel(self) -> None:
        try:
            self._connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
