"""The local transport: courier streams between processes of one host, over Unix sockets.

gRPC spends most of a small call's time in its own per-message machinery (a Python call is
~10x a raw socket round trip here), which buys nothing between two processes of one host.
So every courier server also listens on a Unix socket, and a client of a server on its own
host (hosts.py) opens its streams there: one socket connection per stream, carrying the same
messages as a gRPC stream would, each a record (records.py).

Where the sockets are, and who may use them: `/tmp/launchpad-courier-UID/`, a directory
this user owns and only this user can enter (checked: owner, mode, not a link, before every
use); a socket's name is a digest of this host's identity, the server's host and port and
its TLS (`tls_tag`), so a client finds the socket of the server it means by computing the
name. Neither a client of another TLS (it then goes through gRPC, whose handshake refuses or
accepts it) nor a process of another user (the directory's mode; and each end checks its
peer's uid with SO_PEERCRED before anything else) gets in.

A stream opens with the client's hello, `LPC1`, its token and its shared-memory probe,
sent with its first message. The server reads only the hello (within `HANDSHAKE_SECS`,
at most `MAX_HANDSHAKES` at once: a peer that connects and says nothing is let go, and
costs nothing after), checks the token, answers with its own probe (or ends the stream as
refused), and only then reads messages. The server ends a stream with a status record
(a gRPC status code and its details), so calls fail here as they would over gRPC.
"""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import NoReturn

import grpc
from absl import logging

from launchpad.courier import hosts, records, shared_memory, streams
from launchpad.courier.threads import DaemonThreadPool
from launchpad.courier.tls import TLS, tls_tag

HANDSHAKE_SECS = 5.0
MAX_HANDSHAKES = 64
_MAGIC = b"LPC1"
_HELLO, _ANSWER, _MESSAGE, _STATUS = 1, 2, 3, 4
_HELLO_MAX = 4096
_MAX_MESSAGE = 1 << 62  # as over gRPC: a message is as long as its sender makes it
_FIELD = struct.Struct("<H")
_PEERCRED = struct.Struct("3i")
_MAX_STREAMS = 4096
_BACKLOG = 1024
_CONNECT_SECS = 1.0
_ACCEPT_RETRY_SECS = 0.05
_FRESH_SECS = 0.01
_STALE_SECS = 60.0
# How long a thread polls, without sleeping, for a reply (a client) or for the next message
# (a server's stream, after a reply) before it blocks (records.Reader.spin_secs). Two
# processes on two CPUs of a virtual machine otherwise pay a halted CPU's wake-up (~35 us
# here) on every message: a small call took 110 us instead of 40 on one CPU; polling brings
# it to about 32 us either way, for at most these microseconds of CPU per message.
_REPLY_SPIN_SECS = 100e-6
_NEXT_MESSAGE_SPIN_SECS = 50e-6
_swept = False  # whether this process has swept the socket directory

# The server's side of a stream: the chunks of each reply, for each message read.
StreamHandler = Callable[[Iterator[bytes], streams.Peer], Iterator[list]]


# ----------------------------------------------------------------------------- where


def socket_dir() -> str | None:
    """This user's socket directory, made if missing; None if it is not safely ours."""
    path = f"/tmp/launchpad-courier-{os.getuid()}"
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    info = os.lstat(path)
    if (not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid()
            or info.st_mode & 0o077):
        logging.log_first_n(logging.WARNING, "Courier's socket directory %s is not a "
                            "directory only this user can use; same-host calls use gRPC",
                            1, path)
        return None
    return path


def sweep(directory: str) -> None:
    """Removes the sockets of servers that are gone without removing theirs (a process
    killed): those nobody listens on any more, and old enough that they cannot be a server
    between its bind and its listen."""
    cutoff = time.time() - _STALE_SECS
    for entry in os.scandir(directory):
        try:
            info = entry.stat(follow_symlinks=False)
            if not stat.S_ISSOCK(info.st_mode) or info.st_mtime > cutoff:
                continue
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.setblocking(False)
                probe.connect(entry.path)
            except ConnectionRefusedError:
                os.unlink(entry.path)
            except OSError:
                pass  # listening (the backlog full, or accepted): not stale
            finally:
                probe.close()
        except OSError:
            continue


def socket_path(directory: str, host: str, port: int, tls: TLS | None) -> str:
    key = f"{hosts.host_identity()}|{host}|{port}|{tls_tag(tls)}".encode()
    return os.path.join(directory, f"{port}-{hashlib.blake2b(key, digest_size=8).hexdigest()}")


def _peer_uid(sock: socket.socket) -> int:
    return _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                            _PEERCRED.size))[1]


# ----------------------------------------------------------------------------- server


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
        directory = socket_dir()
        if directory is None:
            return None
        if not _swept:  # once per process: the leftovers of servers that were killed
            _swept = True
            sweep(directory)
        path = socket_path(directory, hosts.normalize(host), port, tls)
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
        reader = records.Reader(connection, max_length=_HELLO_MAX)
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
        if _peer_uid(connection) != os.getuid():
            return None
        connection.settimeout(HANDSHAKE_SECS)
        try:
            kind, hello = reader.read()
        except (EOFError, ValueError, TimeoutError):
            return None
        connection.settimeout(None)
        reader.max_length = _MAX_MESSAGE
        reader.spin_secs = _NEXT_MESSAGE_SPIN_SECS
        fields = _parse_hello(hello) if kind == _HELLO else None
        return None if fields is None else _LocalPeer(connection, *fields)

    def _run(self, connection: socket.socket, reader: records.Reader,
             peer: _LocalPeer) -> None:
        """Answers the hello and serves the stream; ends it with its status."""
        try:
            replies = self._handler(_requests(reader), peer)
            records.send(connection, _ANSWER, [peer.answer.encode()])
            for reply in replies:
                records.send(connection, _MESSAGE, reply)
            code, details = grpc.StatusCode.OK, ""
        except streams.PeerAborted as e:
            code, details = e.code, e.details
        except OSError:
            raise  # the client went away
        except Exception:  # noqa: BLE001 - a failure of ours: said to the client, not its text
            logging.exception("Courier local stream failed")
            code, details = grpc.StatusCode.INTERNAL, "courier: the server failed (see its log)"
        records.send(connection, _STATUS, [_status(code, details)])


def _parse_hello(hello: bytes) -> tuple[str, str] | None:
    """(token, probe) of a hello, or None if it is not one."""
    try:
        if not hello.startswith(_MAGIC):
            return None
        offset, fields = len(_MAGIC), []
        for _ in range(2):
            (length,) = _FIELD.unpack_from(hello, offset)
            offset += _FIELD.size
            fields.append(hello[offset:offset + length].decode())
            offset += length
        return (fields[0], fields[1]) if offset == len(hello) else None
    except (struct.error, UnicodeDecodeError):
        return None


def _hello(token: str, probe: str) -> bytes:
    parts = [_MAGIC]
    for field in (token.encode(), probe.encode()):
        parts += [_FIELD.pack(len(field)), field]
    return b"".join(parts)


def _status(code: grpc.StatusCode, details: str) -> bytes:
    return bytes([code.value[0]]) + details.encode()


_CODES = {code.value[0]: code for code in grpc.StatusCode}


def _requests(reader: records.Reader) -> Iterator[bytes | memoryview]:
    """A stream's messages, until the client ends it."""
    while True:
        try:
            kind, message = reader.read()
        except (EOFError, OSError):
            return
        if kind != _MESSAGE:
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


# ----------------------------------------------------------------------------- client


class LocalChannel:
    """The way to a server of this host through its Unix socket (streams.Channel)."""

    kind = "local"

    def __init__(self, path: str, first: socket.socket):
        self._path = path
        self._first: socket.socket | None = first

    @classmethod
    def find(cls, address: str, tls: TLS | None) -> LocalChannel | None:
        """A channel to the server at `address` if it listens on this host's socket of
        that address (and TLS), else None."""
        directory = socket_dir()
        if directory is None:
            return None
        for host, port in hosts.keys(address):
            path = socket_path(directory, host, port, tls)
            try:
                return cls(path, _connect(path))
            except OSError:
                continue
        return None

    def wait_until_ready(self, timeout: float) -> bool:
        return True

    def is_ready(self) -> bool:
        return True  # a stream opened on a server that is gone fails to connect, at once

    def connect_failure(self) -> str:
        return ""

    def open_stream(self, token: str, offer_shared_memory: bool = False) -> LocalStream:
        """A stream on a new connection (the first one made when the channel was found).

        Raises:
          streams.StreamBroken: the server's socket does not accept connections.
        """
        first, self._first = self._first, None
        try:
            sock = first or _connect(self._path)
        except OSError as e:
            raise streams.StreamBroken(grpc.StatusCode.UNAVAILABLE,
                                       f"cannot connect to {self._path}: {e}") from e
        return LocalStream(sock, token, offer_shared_memory)

    def close(self) -> None:
        if self._first is not None:
            self._first.close()
            self._first = None


def _connect(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(_CONNECT_SECS)
        sock.connect(path)
        sock.settimeout(None)
        if _peer_uid(sock) != os.getuid():
            raise PermissionError(f"{path} is served by another user")
        return sock
    except BaseException:
        sock.close()
        raise


class LocalStream:
    """One stream on its own socket connection (streams.ClientStream)."""

    def __init__(self, sock: socket.socket, token: str, offer_shared_memory: bool):
        self.lane: shared_memory.Lane | None = None
        self._sock = sock
        self._reader = records.Reader(sock, max_length=_MAX_MESSAGE)
        self._reader.spin_secs = _REPLY_SPIN_SECS
        probe = (shared_memory.local_probe() or "") if offer_shared_memory else ""
        self._hello: bytes | None = _hello(token, probe)
        self._status: streams.StreamBroken | None = None
        self._cancelled = False
        self._closed = False
        self._answered_at = 0.0

    def exchange(self, chunks: list, caller_waits: bool = False) -> bytes | memoryview:
        if self._status is not None:
            raise self._status
        hello, self._hello = self._hello, None
        try:
            if hello is not None:  # the hello travels with the first message
                records.send_records(self._sock, [(_HELLO, [hello]), (_MESSAGE, chunks)])
            else:
                records.send(self._sock, _MESSAGE, chunks)
        except OSError as e:
            # The server may have ended the stream first (e.g. refused the token): its
            # status is then waiting to be read.
            raise self._status_left() or self._lost(f"the send failed: {e}") from None
        if hello is not None:
            self._read_answer()
        return self.receive()

    def receive(self) -> bytes | memoryview:
        kind, body = self._read()
        if kind == _MESSAGE:
            self._answered_at = time.monotonic()
            return body
        raise self._ended(kind, body)

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

    def finish(self) -> streams.StreamBroken:
        if not self._closed:
            self._closed = True
            if self._status is None:
                self._status = streams.StreamBroken(grpc.StatusCode.CANCELLED,
                                                    "the stream was cancelled")
            self.cancel()
            self._sock.close()
            if self.lane is not None:
                self.lane.close()
                self.lane = None
        return self._status or streams.StreamBroken(None, "the stream was cancelled")

    def _read_answer(self) -> None:
        kind, body = self._read()
        if kind != _ANSWER:
            raise self._ended(kind, body)
        answer = bytes(body).decode()
        peer = shared_memory.verify_probe(answer) if answer else None
        if peer is not None:
            self.lane = shared_memory.Lane(peer)

    def _status_left(self) -> streams.StreamBroken | None:
        """The status the server sent before it closed the connection, if any."""
        try:
            self._sock.setblocking(False)
            kind, body = self._reader.read()
        except (EOFError, OSError, ValueError):
            return None
        return self._ended(kind, body) if kind == _STATUS else None

    def _read(self) -> tuple[int, bytes | memoryview]:
        try:
            return self._reader.read()
        except (EOFError, OSError, ValueError) as e:
            raise self._lost(f"the connection to the server ended ({e})") from None

    def _ended(self, kind: int, body: bytes | memoryview) -> streams.StreamBroken:
        if kind != _STATUS or not body:
            return self._broken(grpc.StatusCode.INTERNAL, f"unexpected record kind {kind}")
        body = bytes(body)
        code = _CODES.get(body[0], grpc.StatusCode.UNKNOWN)
        return self._broken(code, body[1:].decode(errors="replace"))

    def _lost(self, details: str) -> streams.StreamBroken:
        if self._cancelled or self._closed:
            return self._broken(grpc.StatusCode.CANCELLED, "the stream was cancelled")
        return self._broken(grpc.StatusCode.UNAVAILABLE, details)

    def _broken(self, code: grpc.StatusCode, details: str) -> streams.StreamBroken:
        if self._status is None:
            self._status = streams.StreamBroken(code, details)
        self.finish()
        return self._status
