"""The local transport: courier streams between processes of one host, over Unix sockets.

This module says where the sockets are and what travels on them; socket_server.py listens,
socket_client.py connects.

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
sent with its first message. The server looks only at the hello (within 5 s, with no
thread held meanwhile: socket_server.py; a peer that connects and says nothing is let go, and
costs nothing after), checks the token, answers with its own probe (or ends the stream as
refused), and only then reads messages. The server ends a stream with a status record
(a status code, _status.py, and its details), so calls fail here as they would over gRPC.
"""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import struct
import time
from typing import NoReturn

from absl import logging

from launchpad.courier import errors
from launchpad.courier._process import hosts
from launchpad.courier._shared_memory import lanes, memory_files
from launchpad.courier._sockets import records
from launchpad.courier._status import Status
from launchpad.courier.tls import TLS, tls_tag

MAGIC = b"LPC1"
# The kinds of record: the client's hello, the server's answer to it, a message (either
# way), the server's status that ends the stream.
HELLO, ANSWER, MESSAGE, STATUS = 1, 2, 3, 4
HELLO_MAX = 4096
MAX_MESSAGE = 1 << 62  # as over gRPC: a message is as long as its sender makes it
_FIELD = struct.Struct("<H")
_PEERCRED = struct.Struct("3i")
_STALE_SECS = 60.0
_swept = False  # whether this process has swept the socket directory


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
    between its bind and its listen. One replaced while the sweep looked (a new server of
    that port, not listening yet) is the new server's, and stays."""
    cutoff = time.time() - _STALE_SECS

    def old_socket(info: os.stat_result) -> bool:
        return stat.S_ISSOCK(info.st_mode) and info.st_mtime <= cutoff

    for entry in os.scandir(directory):
        try:
            # Looked at again after the probe: a socket bound meanwhile is young (an inode
            # number, freed by the unlink before that bind, may be the old one's).
            if (old_socket(entry.stat(follow_symlinks=False)) and not listening(entry.path)
                    and old_socket(os.lstat(entry.path))):
                os.unlink(entry.path)
        except OSError:
            continue


def listening(path: str) -> bool:
    """Whether a server listens on the socket at `path`: a connection made without waiting
    and closed at once (its server reads nothing from it and lets it go). Only a socket
    that refuses, or no socket, is not listening; a full backlog is a server that is."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.setblocking(False)
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except OSError:
        pass  # e.g. the backlog is full (EAGAIN)
    finally:
        probe.close()
    return True


def server_path(host: str, port: int, tls: TLS | None) -> str | None:
    """Where the server at host:port puts its socket, or None where this host has no usable
    socket directory. A process's first server sweeps the directory of the sockets of
    servers that were killed."""
    global _swept
    directory = socket_dir()
    if directory is None:
        return None
    if not _swept:
        _swept = True
        sweep(directory)
    return socket_path(directory, hosts.normalize(host), port, tls)


def listen(path: str, backlog: int) -> socket.socket:
    """A listening, non-blocking Unix socket at `path`, only this user's (the old socket of
    a server of this port that is gone replaced: this one has the port)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if os.path.lexists(path):
            os.unlink(path)
        listener.bind(path)
        os.chmod(path, 0o600)
        listener.listen(backlog)
        listener.setblocking(False)
        return listener
    except BaseException:
        listener.close()
        raise


def socket_path(directory: str, host: str, port: int, tls: TLS | None) -> str:
    key = f"{hosts.host_identity()}|{host}|{port}|{tls_tag(tls)}".encode()
    return os.path.join(directory, f"{port}-{hashlib.blake2b(key, digest_size=8).hexdigest()}")


def peer_uid(sock: socket.socket) -> int:
    return _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                            _PEERCRED.size))[1]


# ----------------------------------------------------------------------------- server


def parse_hello(hello: bytes) -> tuple[str, str] | None:
    """(token, probe) of a hello, or None if it is not one."""
    try:
        if not hello.startswith(MAGIC):
            return None
        offset, fields = len(MAGIC), []
        for _ in range(2):
            (length,) = _FIELD.unpack_from(hello, offset)
            offset += _FIELD.size
            fields.append(hello[offset:offset + length].decode("utf-8", "surrogatepass"))
            offset += length
        return (fields[0], fields[1]) if offset == len(hello) else None
    except (struct.error, UnicodeDecodeError):
        return None


def peek_hello(sock: socket.socket) -> bool | None:
    """Looks at a connection's first record without taking it: True if it is a whole
    hello, None if it is still on its way, False if it is no hello (or the peer closed)."""
    try:
        data = sock.recv(records.HEADER_SIZE + HELLO_MAX, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return None
    except OSError:
        return False
    if len(data) < records.HEADER_SIZE:
        return None if data else False
    kind, length = records.header(data)
    if kind != HELLO or length > HELLO_MAX:
        return False
    return True if len(data) >= records.HEADER_SIZE + length else None


def hello(token: str, probe: str) -> bytes:
    """A stream's hello: its token and probe, as text of any characters (a lone surrogate
    too: as the server compares tokens, server.Server.admits)."""
    parts = [MAGIC]
    for field in (token.encode("utf-8", "surrogatepass"), probe.encode("utf-8", "surrogatepass")):
        parts += [_FIELD.pack(len(field)), field]
    return b"".join(parts)


def status(code: Status, details: str) -> bytes:
    return bytes([code]) + details.encode()


def status_of(body: bytes) -> tuple[Status, str]:
    """The code and details of a status record's bytes."""
    return Status.of(body[0]), body[1:].decode(errors="replace")


class LocalPeer:
    """The server's view of one local stream (streams.Peer)."""

    def __init__(self, connection: socket.socket, token: str, probe: str):
        self.token = token
        self.answer = ""  # this process's probe, once the client's lane is accepted
        self._connection = connection
        self._probe = probe

    def accept_shared_memory(self) -> lanes.Lane | None:
        if not self._probe or not lanes.enabled():
            return None
        peer = memory_files.verify_probe(self._probe)
        if peer is None:
            return None
        self.answer = memory_files.local_probe() or ""
        return lanes.Lane(peer)

    def abort(self, code: Status, details: str) -> NoReturn:
        raise errors.PeerAborted(code, details)

    def cancel(self) -> None:
        try:
            self._connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
