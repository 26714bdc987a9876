"""The same-host shortcut for large payloads: shared memory beside a socket stream.

Between two processes on one host, a large buffer (a numpy array, a long bytes value) costs far
more through gRPC than copying it: grpcio copies it into its own buffer, the kernel copies it
through the loopback socket, and the receiving grpcio copies it three more times. On a 2-core
machine that is about 1 ms of CPU per MiB each way. Instead, a stream's writer copies each
large part once into a memory region it owns, the gRPC message carries a small reference, and
the reader copies the part out once (`Lane`, one per stream, holds both ends).

Regions are anonymous memory files (memfd; memory_files.py): a reader opens its peer's region
through `/proc/<peer pid>/fd/<fd>`, so nothing is named and nothing is left behind when a
process dies. Every region starts with a random nonce that each reference repeats: a reader
that finds another nonce (the fd was closed and its number reused) refuses the reference
instead of reading the wrong memory. Regions are reserved in full when made
(`posix_fallocate`), so a full memory limit shows as a failed allocation, and the part travels
through gRPC instead, never as a crash on first touch. And they are sealed against shrinking
(`F_SEAL_SHRINK`): a reader maps only a memory file so sealed, so no peer can truncate a
region under its mapping (reading past the end of a file still mapped is a SIGBUS, the end of
the reading process). What a reference names is looked at before it is opened (`O_PATH`): a
device is never opened.

A region is reused from its start for each message, which is safe because of how courier
streams alternate (see connection.py and server.py): a client sends a message only when every
reply to its previous one has arrived, and a server decodes a whole message, copying its parts
out, before it runs any of its calls; a client decodes every reply to a message before it sends
the next one. So a client's writer `reset`s when it sends, and a server's when it receives.

A call to a whole group (group.py) places its large parts once, in a region of their own
(`share`), and every same-host member's stream references that region instead of copying the
parts into its own (`Writer.hold`): a 1 MiB broadcast to 64 members copies 1 MiB here, not 64.
A stream holds the region as it would its own, until its next reset (the member has read it);
the region closes once no stream and no call holds it. Its header marks it as made for one call,
so each reader unmaps it as soon as it has copied its part out.

Regions of up to `KEEP_WARM` (16 MiB) are kept for the life of the stream, both the writer's
own and the peer's the reader has mapped: reuse is what makes repeated calls cheap (measured on
a 2-core machine, echoes of 1 MiB took 0.85 ms with reuse, 2.0 ms with a fresh region and
mapping per message; of 16 MiB, 7 ms against 28 ms). A larger region is not kept for long, as
each would otherwise hold its size in both processes for as long as the connection lives:

* a reader copies a part out of a larger region and unmaps it at once (mapping it again for
  the next part costs about a tenth of the copy);
* a writer keeps a larger region while messages keep using it, and closes it once it has
  been unused for `IDLE_SECS` (a thread per process, idle_release.py, running only while
  some writer holds such a region). No reset may come for that long, so this does not wait for
  one: it counts on the reader opening a region as soon as its message arrives (it does, on
  the thread that receives it). A reader held up longer than that, its process stopped,
  finds the region gone and fails its stream, loudly, as for a region lost any other way;
  it never reads other memory (nonces) or zeros (pages are never dropped from a region that
  stays open).

Two processes agree to use shared memory per stream: the client offers a probe (pid, fd and
nonce of a small region of its own) in the stream's metadata; the server answers with its own
probe only if it could read the client's; the client then checks the server's. A client marks
its calls as inviting shared-memory replies only once it has checked, so each side writes
regions only for a peer that has shown it can read them. Setting the environment variable
LAUNCHPAD_COURIER_SHARED_MEMORY=0 turns the shortcut off in a process (it neither offers nor
accepts). No ordering of memory between processes is relied on beyond that of the gRPC
messages themselves, which pass through system calls, so this holds on any architecture.
"""

from __future__ import annotations

import ipaddress
import mmap
import os
import struct
import threading
import time

from launchpad.courier._shared_memory import idle_release, memory_files

ENV_SWITCH = "LAUNCHPAD_COURIER_SHARED_MEMORY"
# Parts smaller than this travel inline in the gRPC message; larger ones through a region.
# Measured round trips on a 2-core machine: at 16 KiB a reference costs 15-30 us more than
# inline bytes, at 64 KiB the two are even, at 256 KiB the reference saves 250 us.
INLINE_LIMIT = 64 << 10

# A reference to a part: region fd, region nonce, offset and length of the part.
_REFERENCE = struct.Struct("<IQQQ")
# Data starts one cache line in, after the header; parts start on cache-line boundaries.
_ALIGN = memory_files.HEADER
_SMALLEST_REGION = 1 << 20
# Regions up to this size (made for up to 16 MiB of parts, with their alignment) are kept for
# the stream's life; larger ones only while in use.
KEEP_WARM = (16 << 20) + (64 << 10)
# A writer's region larger than KEEP_WARM is closed once no message has used it for this long.
IDLE_SECS = 5.0
# A region this much larger than what the last message needed is given back at the next reset.
_SHRINK_FACTOR = 4


def enabled() -> bool:
    """Whether this process may use shared memory with its peers: on Linux, where it can make
    memory files (a sandbox may forbid them), unless the switch is off."""
    return (os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "false", "no")
            and hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd")
            and memory_files.local_probe() is not None)


def is_same_host(address: str) -> bool:
    """Whether `address` ('host:port') names this host through loopback, the only case in
    which a shared-memory offer is worth making (the probe still decides)."""
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class SharedPart:
    """A large part of a group call, at `offset` in a region made for that call (`share`)."""

    __slots__ = ("region", "offset", "nbytes")

    def __init__(self, region: memory_files.Region, offset: int, nbytes: int):
        self.region = region
        self.offset = offset
        self.nbytes = nbytes

    def view(self) -> memoryview:
        """The part's bytes, for a stream that sends it inline (no lane)."""
        return memoryview(self.region.map)[self.offset:self.offset + self.nbytes]


def share(parts: list) -> list:
    """`parts` ([pickle, *buffers]) with each large buffer copied once into one region, to be
    sent to many peers of this host; `parts` itself when none is large or no region can be
    had."""
    large = [(i, memoryview(part).nbytes) for i, part in enumerate(parts)
             if i and memoryview(part).nbytes >= INLINE_LIMIT]
    if not large or not enabled():
        return parts
    size = _ALIGN + sum(_aligned(nbytes) for _, nbytes in large)
    try:
        region = memory_files.Region(-(-size // mmap.PAGESIZE) * mmap.PAGESIZE, one_call=True)
    except OSError:  # e.g. the memory limit: each stream copies as it would
        return parts
    shared = list(parts)
    offset = _ALIGN
    for i, nbytes in large:
        region.map[offset:offset + nbytes] = memoryview(parts[i]).cast("B")
        shared[i] = SharedPart(region, offset, nbytes)
        offset += _aligned(nbytes)
    _count("written", sum(nbytes for _, nbytes in large))
    return shared


_copied = {"written": 0, "read": 0}
_copied_lock = threading.Lock()


def _count(direction: str, nbytes: int) -> None:
    with _copied_lock:
        _copied[direction] += nbytes


def bytes_copied() -> dict[str, int]:
    """Bytes this process has copied into shared-memory regions ('written') and out of its
    peers' ('read'): what the shortcut costs, measured (benchmarks/group_calls.py)."""
    with _copied_lock:
        return dict(_copied)


class Writer:
    """Places large parts in regions this process owns (one stream, one thread at a time; the
    idle releaser's thread may close an idle large region meanwhile, hence the lock)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._region: memory_files.Region | None = None
        self._retired: list[memory_files.Region] = []
        # Regions of group calls' parts (`share`), which the peer may not have read yet.
        self._held: list[memory_files.Region] = []
        self._used = _ALIGN
        self._needed = 0  # the most bytes one message needed since the last reset
        self._last_used = 0.0  # time.monotonic() of the last place

    def reset(self) -> None:
        """The peer has read every part placed so far: reuse the region from its start, and
        give back regions no longer used (or too large for what messages need now)."""
        with self._lock:
            self._close_retired()
            self._held = []
            region = self._region
            if (region is not None and region.size > KEEP_WARM
                    and self._needed * _SHRINK_FACTOR < region.size):
                self._retired.append(region)
                self._region = None
            self._used = _ALIGN
            self._needed = 0

    def place(self, parts: list) -> list[bytes] | None:
        """Copies `parts` (bytes-like, contiguous) into one region; returns a reference for
        each, or None when no region could be had (the parts then travel inline)."""
        sizes = [memoryview(part).nbytes for part in parts]
        total = sum(_aligned(size) for size in sizes)
        with self._lock:
            self._needed = max(self._needed, total)
            if self._region is None or self._used + total > self._region.size:
                if not self._new_region(total):
                    return None
            region = self._region
            references = []
            for part, size in zip(parts, sizes, strict=True):
                region.map[self._used:self._used + size] = memoryview(part).cast("B")
                references.append(_REFERENCE.pack(region.fd, region.nonce, self._used, size))
                self._used += _aligned(size)
            self._last_used = time.monotonic()
        _count("written", sum(sizes))
        if region.size > KEEP_WARM:
            idle_release.watch(self)
        return references

    def hold(self, part: SharedPart) -> bytes:
        """A reference to a part `share` placed, whose region is held until the next reset."""
        with self._lock:
            self._held.append(part.region)
            self._last_used = time.monotonic()
        if part.region.size > KEEP_WARM:
            idle_release.watch(self)
        return _REFERENCE.pack(part.region.fd, part.region.nonce, part.offset, part.nbytes)

    def close(self) -> None:
        with self._lock:
            self._close_retired()
            self._held = []
            if self._region is not None:
                self._region.close()
                self._region = None

    def release_if_idle(self, now: float) -> float | None:
        """Closes this writer's regions if one is larger than KEEP_WARM and none was used
        for IDLE_SECS before `now`; returns when to look again, or None when no large region
        is left (idle_release.py asks)."""
        with self._lock:
            regions = self._retired + self._held + ([self._region] if self._region else [])
            if all(region.size <= KEEP_WARM for region in regions):
                return None
            if now < self._last_used + IDLE_SECS:
                return self._last_used + IDLE_SECS
            self._held = []
            if self._region is not None and self._region.size > KEEP_WARM:
                self._retired.append(self._region)
                self._region = None
            self._close_retired()
            return None

    def _close_retired(self) -> None:
        for region in self._retired:
            region.close()
        self._retired = []

    def _new_region(self, total: int) -> bool:
        old = self._region
        size = max(_SMALLEST_REGION, _ALIGN + total, 2 * old.size if old else 0)
        size = -(-size // mmap.PAGESIZE) * mmap.PAGESIZE
        try:
            region = memory_files.Region(size)
        except OSError:  # e.g. the memory limit: fall back to inline parts
            return False
        if old is not None:
            self._retired.append(old)  # a reader may not have opened it yet: keep it a while
        self._region = region
        self._used = _ALIGN
        return True


def _aligned(size: int) -> int:
    return -(-size // _ALIGN) * _ALIGN


class Reader:
    """Copies parts out of a peer's regions (one stream, one thread at a time).

    A message's parts all lie in one region, and a writer never goes back to a region it
    replaced, so only the latest region stays mapped, and only if it is small (KEEP_WARM).
    """

    def __init__(self, peer_pid: int):
        self._pid = peer_pid
        self._key: tuple[int, int] | None = None
        self._map: mmap.mmap | None = None
        self._view: memoryview | None = None
        self._one_call = False  # the region mapped was made for one group call

    def take(self, reference: memoryview) -> memoryview:
        """The bytes a reference names, copied out (read-only, as inline parts are).

        Raises:
          ValueError: the reference is malformed, or names a region that is gone.
        """
        fd, nonce, offset, size = _REFERENCE.unpack(reference)
        if self._key != (fd, nonce):
            self._open(fd, nonce)
        if offset < _ALIGN or offset + size > len(self._view):
            raise ValueError(f"a shared-memory part ({offset}+{size}) lies outside its region "
                             f"of {len(self._view)} bytes")
        part = memoryview(bytes(self._view[offset:offset + size]))
        _count("read", size)
        if self._one_call or len(self._view) > KEEP_WARM:
            self.close()  # a group call's or a large region: unmapped once read (module doc)
        return part

    def close(self) -> None:
        if self._view is not None:
            self._view.release()
            self._map.close()
        self._key = self._map = self._view = None

    def _open(self, fd: int, nonce: int) -> None:
        self.close()
        region_map, self._one_call = memory_files.map_peer_region(self._pid, fd, nonce)
        self._key, self._map, self._view = (fd, nonce), region_map, memoryview(region_map)


class Lane:
    """One stream's shared memory: regions this side writes, and the peer's it reads."""

    def __init__(self, peer_pid: int):
        self.writer = Writer()
        self.reader = Reader(peer_pid)

    def close(self) -> None:
        self.writer.close()
        self.reader.close()


