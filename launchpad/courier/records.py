"""Length-prefixed records on a stream socket: how the local transport frames its messages.

A record is a 9-byte header, `<B kind><Q length>`, then `length` bytes. A record is sent
with one `sendmsg` of its header and its chunks (scatter-gather: a message's out-of-band
buffers, numpy array data among them, go from where they lie to the kernel with no join).
It is received through a small buffer that takes whole small records in one system call; a
large one is read straight into a buffer of its own size, which the message's frames then
view (read-only, like a gRPC message's bytes), so a received array is never copied again.
A buffer beyond glibc's mmap threshold (allocator.py) is memory mapped for the record, whose
pages the kernel provides only as its bytes arrive: a length that lies, with no bytes behind
it, costs nothing (a bytearray would zero all of it first).

A reader may poll briefly before it blocks (`spin_secs`): a record that arrives meanwhile
costs no wake-up of a sleeping thread, which is most of a small call's time between two
CPUs of a virtual machine. It yields its CPU while it polls (a peer on the same CPU runs),
and only one thread of a process polls at a time, so busy processes do not burn CPU on it.
"""

from __future__ import annotations

import mmap
import os
import socket
import struct
import time

from launchpad.courier import allocator

_HEADER = struct.Struct("<BQ")
HEADER_SIZE = _HEADER.size
# A small record is copied out of the receive buffer; a larger one gets a buffer of its own.
_BUFFER = 64 << 10
_spinning: list = []  # the thread of this process spinning, if any
# sendmsg takes at most IOV_MAX (1024 on Linux) pieces at once.
_MAX_PIECES = 512


def send(sock: socket.socket, kind: int, chunks: list) -> None:
    """Sends one record of `kind` holding `chunks` (bytes-like) back to back.

    Raises:
      OSError: the connection failed (e.g. the peer is gone).
    """
    send_records(sock, [(kind, chunks)])


def send_records(sock: socket.socket, kinds_and_chunks: list[tuple[int, list]]) -> None:
    """Sends records back to back, in as few system calls as their pieces allow."""
    pieces: list = []
    for kind, chunks in kinds_and_chunks:
        views = [memoryview(chunk).cast("B") for chunk in chunks]
        pieces += [_HEADER.pack(kind, sum(view.nbytes for view in views)), *views]
    while pieces:
        batch = pieces[:_MAX_PIECES]
        sent = sock.sendmsg(batch)
        taken = 0
        for piece in batch:  # drop what went, keep the unsent end of a piece half sent
            size = len(piece)
            if sent < size:
                break
            sent -= size
            taken += 1
        del pieces[:taken]
        if sent:
            pieces[0] = memoryview(pieces[0])[sent:]


class Reader:
    """Reads records from one socket (one thread at a time); `max_length` bounds a record
    (raise it once the peer is known), `spin_secs` is how long it polls before it blocks."""

    def __init__(self, sock: socket.socket, max_length: int):
        self._sock = sock
        self.max_length = max_length
        self.spin_secs = 0.0
        self._buffer = bytearray(_BUFFER)
        self._view = memoryview(self._buffer)
        self._start = 0
        self._end = 0

    def read(self) -> tuple[int, bytes | memoryview]:
        """The next record's kind and bytes.

        Raises:
          EOFError: the peer closed the connection (before a record, or inside one).
          ValueError: a record longer than `max_length`, or than this process can hold.
          OSError: the connection failed, or a timeout set on the socket passed.
        """
        while self._end - self._start < HEADER_SIZE:
            self._fill()
        kind, length = _HEADER.unpack_from(self._view, self._start)
        if length > self.max_length:
            raise ValueError(f"a record of {length} bytes is longer than the "
                             f"{self.max_length} bytes allowed")
        self._start += HEADER_SIZE
        if length <= _BUFFER - HEADER_SIZE:
            while self._end - self._start < length:
                self._fill()
            body = bytes(self._view[self._start:self._start + length])
            self._start += length
            return kind, body
        return kind, self._read_large(length)

    def _fill(self) -> None:
        """Receives more bytes, first moving what is left to the buffer's front."""
        if self._start:
            left = self._end - self._start
            self._view[:left] = self._view[self._start:self._end]
            self._start, self._end = 0, left
        into = self._view[self._end:]
        received = self._spin(into) if self.spin_secs else None
        if received is None:
            received = self._sock.recv_into(into)
        if not received:
            raise EOFError("the peer closed the connection")
        self._end += received

    def _spin(self, into: memoryview) -> int | None:
        """Receives what arrives within `spin_secs` without sleeping, if no other thread of
        this process spins; None if nothing came (the caller then blocks)."""
        if _spinning:
            return None
        _spinning.append(None)  # (list appends and pops are atomic: no lock on the hot path)
        try:
            deadline = time.perf_counter() + self.spin_secs
            while True:
                try:
                    return self._sock.recv_into(into, 0, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    if time.perf_counter() > deadline:
                        return None
                    os.sched_yield()  # a peer on this CPU runs now
        finally:
            _spinning.pop()

    def _read_large(self, length: int) -> memoryview:
        view = memoryview(_buffer(length))
        got = min(length, self._end - self._start)
        view[:got] = self._view[self._start:self._start + got]
        self._start += got
        while got < length:
            received = self._sock.recv_into(view[got:])
            if not received:
                raise EOFError("the peer closed the connection inside a record")
            got += received
        return view.toreadonly()


def _buffer(length: int) -> bytearray | mmap.mmap:
    """A writable buffer for a record's `length` bytes (see the module doc)."""
    if length <= allocator.MMAP_THRESHOLD_BYTES:
        return bytearray(length)
    try:
        return mmap.mmap(-1, length, flags=mmap.MAP_PRIVATE)
    except (OSError, OverflowError) as e:
        raise ValueError(f"a record of {length} bytes is longer than this process can "
                         f"hold ({e})") from e
