"""How many connections a courier server may hold, so that idle ones cannot starve it.

Every connection a server accepts takes a file descriptor, and gRPC keeps one that never sends
a byte until its handshake deadline passes. Once a process runs out of descriptors its servers
accept nothing more: connections queue in the kernel's backlog, each batch accepted only as
the previous one times out, so a flood of idle connections kept real clients out for minutes
(120 s per batch at gRPC's default deadline: 1,000 idle connections to a server limited to 256
open files kept a new client out for 240 s). Three bounds work together: a short handshake
deadline (grpc_server.py's options) and these two, set when a server starts:

* `raise_open_files_limit`: the soft limit on open files goes up to the hard limit, as far as
  the kernel allows. Soft limits are often 1024 for the sake of select(), which courier does
  not use; a process that does, with more than 1024 files open, gets an error from it rather
  than a wrong answer.
* `incoming_connections_cap`: gRPC refuses (accepts and closes at once) connections beyond
  this many per server, so that idle ones cannot take the descriptors the process needs for
  anything else (its own clients, files, shared-memory regions): three quarters of the limit.
  A process with several servers gives each the same cap.
"""

from __future__ import annotations

import resource
import threading

_lock = threading.Lock()
_raised = False
_NR_OPEN = "/proc/sys/fs/nr_open"
_INT_MAX = 2**31 - 1


def raise_open_files_limit() -> int:
    """Raises this process's soft limit on open files to its hard limit (once per process;
    left as it is where the kernel refuses); returns the soft limit now."""
    global _raised
    with _lock:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if _raised:
            return soft
        _raised = True
        wanted = hard if hard != resource.RLIM_INFINITY else _kernel_ceiling(soft)
        if wanted > soft:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
                soft = wanted
            except (ValueError, OSError):  # e.g. a sandbox that forbids it
                pass
        return soft


def incoming_connections_cap() -> int:
    """How many connections one server may hold at once (see the module doc)."""
    limit = raise_open_files_limit()
    if limit == resource.RLIM_INFINITY:
        limit = _kernel_ceiling(_INT_MAX)
    # gRPC aborts the process on a cap of INT_MAX or more.
    return max(1, min(limit * 3 // 4, _INT_MAX - 1))


def _kernel_ceiling(soft: int) -> int:
    """The most open files the kernel lets a process have (no limit above that is accepted)."""
    try:
        with open(_NR_OPEN) as nr_open:
            return int(nr_open.read())
    except (OSError, ValueError):
        return soft
