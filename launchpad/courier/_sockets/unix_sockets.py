"""The local transport: courier streams between processes of one host, over Unix sockets.

This module says where the sockets are and who may use them; socket_wire.py says what
travels on them, socket_server.py listens, socket_client.py connects.

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
"""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import struct
import time

from absl import logging

from launchpad.courier._process import hosts
from launchpad.courier.tls import TLS, tls_tag

_PEERCRED = struct.Struct("3i")
_STALE_SECS = 60.0
_swept = False  # whether this process has swept the socket directory
DIRECTORY = f"/tmp/launchpad-courier-{os.getuid()}"  # this user's, shared by its processes


def socket_dir() -> str | None:
    """This user's socket directory, made if missing; None if it is not safely ours."""
    path = DIRECTORY
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
