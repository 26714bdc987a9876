"""Memory files: the regions courier's shared memory is made of (lanes.py).

A `Region` is an anonymous memory file (memfd) this process makes, reserved in full and
sealed against shrinking, with a random nonce in its header. A peer of this host opens it
through `/proc/<pid>/fd/<fd>` (`map_peer_region`), checks the seal and the nonce, and maps it
read-only: nothing is named, and nothing is left behind when a process dies. Two processes
show each other that they can do so with probes (`local_probe`, `verify_probe`): a small
region each, made once per process.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import stat
import struct
import threading
import weakref

NONCE = struct.Struct("<Q")
HEADER = 64  # the nonce, the kind of region, then data from one cache line in
_ONE_CALL = 1  # the header byte after the nonce of a region made for one group call


class Region:
    """A memory file of `size` bytes, mapped read-write, its nonce in its first bytes
    (`one_call`: made for one group call's parts, which a reader unmaps once read)."""

    def __init__(self, size: int, one_call: bool = False):
        self.nonce = int.from_bytes(os.urandom(NONCE.size), "little")
        self.size = size
        self.fd = os.memfd_create("launchpad-courier", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.posix_fallocate(self.fd, 0, size)
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
            self.map = mmap.mmap(self.fd, size)
        except BaseException:
            os.close(self.fd)
            raise
        self.map[:NONCE.size] = NONCE.pack(self.nonce)
        self.map[NONCE.size] = _ONE_CALL if one_call else 0
        # The fd must stay open while a peer may still open it; a region dropped without
        # close() (its stream, or the group call that made it, garbage-collected) still
        # gives its fd back.
        self._finalizer = weakref.finalize(self, _close_region, self.fd, self.map)

    def close(self) -> None:
        self._finalizer()


def _close_region(fd: int, region_map: mmap.mmap) -> None:
    with contextlib.suppress(BufferError):  # a view still sent inline: unmapped with it
        region_map.close()
    os.close(fd)


def map_peer_region(pid: int, fd: int, nonce: int) -> tuple[mmap.mmap, bool]:
    """Maps, read-only, the region `fd` of process `pid` whose nonce is `nonce`; returns the
    map and whether the region was made for one group call.

    Raises:
      ValueError: the region is gone, is not a sealed memory file, or is another region.
    """
    try:
        descriptor = _open_peer_file(pid, fd)
    except OSError as e:
        raise ValueError(f"the peer's shared-memory region (fd {fd} of pid {pid}) is gone: "
                         f"{e}") from e
    try:
        if not _sealed_against_shrinking(descriptor):
            raise ValueError(f"fd {fd} of pid {pid} is not a memory file sealed against "
                             "shrinking")
        region_map = mmap.mmap(descriptor, 0, prot=mmap.PROT_READ)
    finally:
        os.close(descriptor)
    if len(region_map) < HEADER or NONCE.unpack_from(region_map)[0] != nonce:
        region_map.close()
        raise ValueError(f"fd {fd} of pid {pid} is no longer the shared-memory region a "
                         "message referenced")
    return region_map, region_map[NONCE.size] == _ONE_CALL


def _open_peer_file(pid: int, fd: int) -> int:
    """Opens a file another process holds open, read-only. Without blocking, and only a
    regular file (a memory file is one), looked at through an `O_PATH` descriptor before it
    is opened: a reference must never make us wait on a pipe or open a device."""
    found = os.open(f"/proc/{pid}/fd/{fd}", os.O_PATH | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(found).st_mode):
            raise OSError(f"fd {fd} of pid {pid} is not a memory file")
        return os.open(f"/proc/self/fd/{found}", os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    finally:
        os.close(found)


def _sealed_against_shrinking(descriptor: int) -> bool:
    try:
        return bool(fcntl.fcntl(descriptor, fcntl.F_GET_SEALS) & fcntl.F_SEAL_SHRINK)
    except OSError:  # not a memory file
        return False


# ----------------------------------------------------------------------------- probes

_probe_lock = threading.Lock()
# The pid that made the probe, the probe's region and its 'pid:fd:nonce' (both None when no
# memory file could be made), kept for the life of the process.
_probe: tuple[int, Region | None, str | None] | None = None


def local_probe() -> str | None:
    """This process's probe, 'pid:fd:nonce' (made once per process); None if this process
    cannot make memory files (then it uses no shared memory at all)."""
    global _probe
    with _probe_lock:
        if _probe is None or _probe[0] != os.getpid():  # a forked child makes its own
            try:
                region = Region(HEADER)
                _probe = (os.getpid(), region, f"{os.getpid()}:{region.fd}:{region.nonce}")
            except OSError:  # e.g. memfd_create forbidden by a seccomp profile
                _probe = (os.getpid(), None, None)
        return _probe[2]


def verify_probe(probe: str) -> int | None:
    """Reads a peer's probe; returns the peer's pid when its region is readable from here."""
    try:
        pid, fd, nonce = (int(field) for field in probe.split(":"))
        return pid if _read_nonce(pid, fd) == nonce else None
    except (ValueError, OSError):
        return None


def _read_nonce(pid: int, fd: int) -> int:
    descriptor = _open_peer_file(pid, fd)
    try:
        head = os.pread(descriptor, NONCE.size, 0)
    finally:
        os.close(descriptor)
    return NONCE.unpack(head)[0] if len(head) == NONCE.size else -1
