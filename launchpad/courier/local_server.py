"""The local transport's server side: a server's Unix socket, and a thread per stream.

See local_sockets.py for the transport, its sockets and who may use them. The accepting
thread hands each connection to a thread of its own, which reads the peer's hello within
`HANDSHAKE_SECS` (at most `MAX_HANDSHAKES` connections wait for theirs at once; more are
closed at once), then serves the stream as gRPC's thread would, with the same handler.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator
from typing import NoReturn

import grpc
from absl import logging

from launchpad.courier import hosts, local_sockets, records, shared_memory, streams
from launchpad.courier.threads import DaemonThreadPool
from launchpad.courier.tls import TLS

HANDSHAKE_SECS = 5.0
MAX_HANDSHAKES = 64
_MAX_STREAMS = 4096
_BACKLOG = 1024
_ACCEPT_RETRY_SECS = 0.05
# How long a stream's thread polls for the next message after a reply before it blocks
# (records.Reader.spin_secs; local_client.py says why).
_NEXT_MESSAGE_SPIN_SECS = 50e-6
_swept = False  # whether this process has swept the socket directory

# The server's side of a stream: the chunks of each reply, for each message read.
StreamHandler = Callable[[Iterator[bytes], streams.Peer], Iterator[list]]


class LocalServer:
    """Listens on a server's Unix socket and runs each stream on a thread of its own."""

    def __init__(self, handler: StreamHandler, path: str):
        self.path = path
        self._handler = handler
        self._handshakes = threading.BoundedSemaphore(MAX_HANDSHAKES)
        self._stopped = threading.Event()
        self._pool = DaemonThreadPool(_MAX_STREAMS, thread_name_prefix="courier-local")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if os.path.lexists(path):
                os.unlink(path)  # a server of this port that is gone (this one has the port)
            self._listener.bind(path)
            os.chmod(path, 0o600)
            self._listener.listen(_BACKLOG)
        except BaseException:
            self._listener.close()
            raise
        self._inode = os.stat(path).st_ino
        self._thread = threading.Thread(target=self._accept, name="courier-local-accept",
                                        daemon=True)

    @classmethod
    def bind(cls, handler: StreamHandler, host: str, port: int,
             tls: TLS | None) -> LocalServer | None:
        """A listener for the server at host:port, or None where this host has no usable
        socket directory (the server is then reached through gRPC alone)."""
        global _swept
        directory = local_sockets.socket_dir()
        if directory is None:
            return None
        if not _swept:  # once per process: the leftovers of servers that were killed
            _swept = True
            local_sockets.sweep(directory)
        path = local_sockets.socket_path(directory, hosts.normalize(host), port, tls)
        try:
            return cls(handler, path)
        except OSError as e:
            logging.warning("Courier server on port %d has no local socket (%s); same-host "
                            "clients use gRPC", port, e)
            return None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stops accepting (streams are ended by the server, through their peers)."""
        self._stopped.set()
        try:
            if os.stat(self.path).st_ino == self._inode:  # not a newer server's socket
                os.unlink(self.path)
        except OSError:
            pass
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        except OSError:
            pass
        self._listener.close()
        self._pool.shutdown(wait=False)

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                if self._stopped.is_set():
                    return
                # E.g. no file descriptor left (EMFILE): the backlog waits, and so do we,
                # a moment, rather than spin.
                self._stopped.wait(_ACCEPT_RETRY_SECS)
                continue
            if not self._handshakes.acquire(blocking=False):
                connection.close()  # too many peers that have not said who they are
                continue
            try:
                self._pool.submit(self._serve, connection)
            except RuntimeError:  # stopped meanwhile: its pool is shut down
                self._handshakes.release()
                connection.close()
                return

    def _serve(self, connection: socket.socket) -> None:
        reader = records.Reader(connection, max_length=local_sockets.HELLO_MAX)
        try:
            try:
                peer = self._greet(connection, reader)
            finally:
                self._handshakes.release()
            if peer is not None:
                self._run(connection, reader, peer)
        except OSError:
            pass  # the client went away
        finally:
            connection.close()

    def _greet(self, connection: socket.socket, reader: records.Reader) -> _LocalPeer | None:
        """Reads the hello of a peer of this user within the handshake's time."""
        if local_sockets.peer_uid(connection) != os.getuid():
            return None
        connection.settimeout(HANDSHAKE_SECS)
        try:
            kind, hello = reader.read()
        except (EOFError, ValueError, TimeoutError):
            return None
        connection.settimeout(None)
        reader.max_length = local_sockets.MAX_MESSAGE
        reader.spin_secs = _NEXT_MESSAGE_SPIN_SECS
        fields = local_sockets.parse_hello(hello) if kind == local_sockets.HELLO else None
        return None if fields is None else _LocalPeer(connection, *fields)

    def _run(self, connection: socket.socket, reader: records.Reader,
             peer: _LocalPeer) -> None:
        """Answers the hello and serves the stream; ends it with its status."""
        try:
            replies = self._handler(_requests(reader), peer)
            records.send(connection, local_sockets.ANSWER, [peer.answer.encode()])
            for reply in replies:
                records.send(connection, local_sockets.MESSAGE, reply)
            code, details = grpc.StatusCode.OK, ""
        except streams.PeerAborted as e:
            code, details = e.code, e.details
        except OSError:
            raise  # the client went away
        except Exception:  # noqa: BLE001 - a failure of ours: said to the client, not its text
            logging.exception("Courier local stream failed")
            code, details = grpc.StatusCode.INTERNAL, "courier: the server failed (see its log)"
        records.send(connection, local_sockets.STATUS, [local_sockets.status(code, details)])


def _requests(reader: records.Reader) -> Iterator[bytes | memoryview]:
    """A stream's messages, until the client ends it; a record the stream cannot hold ends
    it as a malformed message does (INVALID_ARGUMENT)."""
    while True:
        try:
            kind, message = reader.read()
        except (EOFError, OSError):
            return
        except ValueError as e:
            raise streams.PeerAborted(grpc.StatusCode.INVALID_ARGUMENT, f"courier: {e}") from None
        if kind != local_sockets.MESSAGE:
            return
        yield message


class _LocalPeer:
    """The server's view of one local stream (streams.Peer)."""

    def __init__(self, connection: socket.socket, token: str, probe: str):
        self.token = token
        self.answer = ""  # this process's probe, once the client's lane is accepted
        self._connection = connection
        self._probe = probe

    def accept_shared_memory(self) -> shared_memory.Lane | None:
        if not self._probe or not shared_memory.enabled():
            return None
        peer = shared_memory.verify_probe(self._probe)
        if peer is None:
            return None
        self.answer = shared_memory.local_probe() or ""
        return shared_memory.Lane(peer)

    def abort(self, code: grpc.StatusCode, details: str) -> NoReturn:
        raise streams.PeerAborted(code, details)

    def cancel(self) -> None:
        try:
            self._connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
