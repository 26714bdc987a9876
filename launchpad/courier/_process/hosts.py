"""Which host an address names, as far as a transport needs to know.

A courier server is reachable through every transport at once (channels.py), and a client
takes the fastest one that reaches the same server: the server object itself when it is in
this process, a Unix socket when it is on this host, gRPC otherwise. "This host" means this
kernel and this network namespace (`host_identity`): two network namespaces are two hosts,
whatever they share, since that is how a port is found. An address names a server of this
host when its host is one of this namespace's own addresses (`is_local`): a connection to it
could not leave the namespace.
"""

from __future__ import annotations

import functools
import os
import socket

# How a server bound to every interface is keyed (0.0.0.0, ::, or an empty host).
ANY_HOST = "*"
_WILDCARDS = ("", "0.0.0.0", "::")


@functools.cache
def _boot_id() -> str:
    with open("/proc/sys/kernel/random/boot_id") as f:
        return f.read().strip()


def host_identity() -> str:
    """This process's kernel (its boot id) and network namespace (its inode), as text."""
    return f"{_boot_id()}/net:{os.stat('/proc/self/ns/net').st_ino}"


def split(address: str) -> tuple[str, int] | None:
    """'host:port' (or '[v6]:port') as (normalized host, port); None if it is not one."""
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        return None
    return normalize(host.strip("[]")), int(port)


def normalize(host: str) -> str:
    """A host as servers are keyed by: `ANY_HOST` for the wildcards, 127.0.0.1 for
    localhost."""
    if host in _WILDCARDS:
        return ANY_HOST
    return "127.0.0.1" if host == "localhost" else host


@functools.lru_cache(maxsize=256)
def _is_local_in(host: str, namespace: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((host, 0))  # only an address of this namespace can be bound
        return True
    except (OSError, ValueError):
        return False


def is_local(host: str) -> bool:
    """Whether `host` (an IP address, normalized) is an address of this network namespace."""
    if host == ANY_HOST:
        return False
    return _is_local_in(host, os.stat("/proc/self/ns/net").st_ino)


def keys(address: str) -> list[tuple[str, int]]:
    """The keys a server at `address` may be registered under in this host: its host, and
    the wildcard when the host is one of this namespace's own (a server bound to every
    interface answers there). Empty when the address cannot name a server of this host."""
    parsed = split(address)
    if parsed is None:
        return []
    host, port = parsed
    if host == ANY_HOST:
        return []
    found = [(host, port)]
    if is_local(host):
        found.append((ANY_HOST, port))
    return found
