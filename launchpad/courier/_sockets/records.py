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
and it polls only when no other thread of its process waits for a record that comes quickly:
a poll would hold the interpreter that their records need as they arrive (measured: four
threads calling at once lost a quarter of their calls to one poll). A thread that waits long
(a call that returns at a program's end) does not count.
"""

from __future__ import annotations

import mmap
import os
import socket
import struct
import time

from launchpad.courier._process import allocator

_HEADER = struct.Struct("<BQ")
HEADER_SIZE = _HEADER.size
# A small record is copied out of the receive buffer; a larger one gets a buffer of its own.
_BUFFER = 64 << 10
# Receive buffers let go of (`Reader.release`), for the next reader that needs one: a server
# releases a stream's buffer after every message, and making one costs its zeroing. At most
# this many are kept (list appends and pops are atomic: no lock on the hot path).
_spare_buffers: list = []
_MAX_SPARE_BUFFERS = 8
_spinning: list = []  # the thread of this process spinning, if any
# The readers of this process waiting for a record -> when they began (dict stores and
# deletes are atomic: no lock on the hot path). While another began less than _QUICK_SECS
# ago, no thread polls: its record, as it arrives, needs the interpreter that a poll would
# hold. One that waits longer (a call that returns at a program's end) does not count.
_waiting: dict = {}
_QUICK_SECS = 1e-3
# sendmsg takes at most IOV_MAX (1024 on Linux) pieces at once.
_MAX_PIECES = 512


def header(data: bytes) -> tuple[int, int]:
    """The kind and length of the record whose header begins `data` (HEADER_SIZE bytes or
    more)."""
    return _HEADER.unpack_from(data)


def pack_header(kind: int, length: int) -> bytes:
    """The header of a record of `kind` whose body is `length` bytes."""
    return _HEADER.pack(kind, length)


def send(sock: socket.socket, kind: int, chunks: list) -> None:
    """Sends one record of `kind` holding `chunks` (bytes-like) back to back.

    Raises:
      OSError: the connection failed (e.g. the peer is gone).
    """
    send_records(sock, [(kind, chunks)])


def send_records(sock: socket.socket, kinds_and_chunks: list[tuple[int, list]]) -> None:
    """Sends records back to back, in as few system calls as their pieces allow."""
    pieces: list = []
    total = 0
    for kind, chunks in kinds_and_chunks:
        if all(type(chunk) is bytes for chunk in chunks):  # most messages: no view needed
            length = sum(map(len, chunks))
            pieces.append(_HEADER.pack(kind, length))
            pieces += chunks
        else:
            chunks = [memoryview(chunk).cast("B") for chunk in chunks]
            length = sum(view.nbytes for view in chunks)
            pieces += [_HEADER.pack(kind, length), *chunks]
        total += HEADER_SIZE + length
    sent = sock.sendmsg(pieces[:_MAX_PIECES] if len(pieces) > _MAX_PIECES else pieces)
    if sent == total:
        return  # (the common case: all went at once)
    while True:  # drop what went, keep the unsent end of a piece half sent
        taken = 0
        for piece in pieces:
            size = len(piece)
            if sent < size:
                break
            sent -= size
            taken += 1
        del pieces[:taken]
        if not pieces:
            return
        if sent:
            pieces[0] = memoryview(pieces[0])[sent:]
        sent = sock.sendmsg(pieces[:_MAX_PIECES])


class Reader:
    """Reads records from one socket (one thread at a time); `max_length` bounds a record
    (raise it once the peer is known), `spin_secs` is how long it polls before it blocks.

    Its receive buffer exists only while a record is on its way or bytes wait in it
    (`release`): a server parks thousands of idle streams, and each would hold 64 KiB. A
    few released buffers are kept for the readers that next need one.
    """

    def __init__(self, sock: socket.socket, max_length: int):
        self._sock = sock
        self.max_length = max_length
        self.spin_secs = 0.0
        self._view: memoryview | None = None
        self._start = 0
        self._end = 0
        self._eof = False  # seen by `ready`: the next read raises EOFError
        self._held = False  # a receive may time out (`hold`): then it is made again

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

    def ready(self, spin_secs: float) -> bool:
        """Whether a read would start without waiting: bytes are buffered, or arrive
        within `spin_secs` (if no other thread of this process polls meanwhile), or the
        peer has closed. False may be wrong (the caller then waits for the socket to be
        readable); True never is. Raises OSError if the connection failed."""
        if self._end > self._start or self._eof:
            return True
        return self._took(self._spin(self._free_space(), spin_secs))

    def hold(self, secs: float) -> None:
        """Makes `wait` wait at most `secs` (the socket's kernel receive timeout: one
        system call per wait, not a poll and a receive). A record under way is still read
        whole, however long its parts take."""
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                              struct.pack("ll", int(secs), int(secs % 1 * 1e6)))
        self._held = True

    def wait(self) -> bool:
        """Whether a read would start without waiting, after waiting for bytes as long as
        `hold` said (blocking this thread, not polling). Raises OSError if the connection
        failed."""
        if self._end > self._start or self._eof:
            return True
        try:
            return self._took(self._sock.recv_into(self._free_space()))
        except BlockingIOError:
            return False

    def _took(self, received: int | None) -> bool:
        """Counts bytes received ahead of a read (0: the peer closed); False if none was."""
        if received is None:
            return False
        self._eof = not received
        self._end += received
        return True

    def release(self) -> None:
        """Lets go of the receive buffer if no byte waits in it (it is made again when
        bytes come)."""
        if self._end == self._start and self._view is not None:
            if len(_spare_buffers) < _MAX_SPARE_BUFFERS:
                _spare_buffers.append(self._view)
            self._view = None
            self._start = self._end = 0

    def _free_space(self) -> memoryview:
        """The free end of the receive buffer, made if released, what is left of earlier
        bytes first moved to its front."""
        if self._view is None:
            try:
                self._view = _spare_buffers.pop()
            except IndexError:
                self._view = memoryview(bytearray(_BUFFER))
        elif self._start:
            left = self._end - self._start
            self._view[:left] = self._view[self._start:self._end]
            self._start, self._end = 0, left
        return self._view[self._end:]

    def _fill(self) -> None:
        """Receives more bytes into the buffer."""
        if self._eof:
            raise EOFError("the peer closed the connection")
        into = self._free_space()
        _waiting[self] = time.perf_counter()
        try:
            received = self._spin(into, self.spin_secs)
            if received is None:
                received = self._receive(into)
        finally:
            del _waiting[self]
        if not received:
            raise EOFError("the peer closed the connection")
        self._end += received

    def _receive(self, into: memoryview) -> int:
        """Receives into `into`, waiting as long as it takes."""
        while True:
            try:
                return self._sock.recv_into(into)
            except BlockingIOError:
                if not self._held:
                    raise

    def _spin(self, into: memoryview, secs: float) -> int | None:
        """Receives what arrives within `secs` without sleeping, if no other reader of this
        process began to wait lately; None if nothing came (the caller then blocks)."""
        if _spinning or secs <= 0 or _others_wait(self):
            return None
        _spinning.append(None)  # (list appends and pops are atomic: no lock on the hot path)
        try:
            deadline = time.perf_counter() + secs
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
            received = self._receive(view[got:])
            if not received:
                raise EOFError("the peer closed the connection inside a record")
            got += received
        return view.toreadonly()


def _others_wait(reader: Reader) -> bool:
    """Whether a reader other than `reader` began to wait less than _QUICK_SECS ago."""
    if len(_waiting) <= (reader in _waiting):
        return False
    lately = time.perf_counter() - _QUICK_SECS
    return any(began > lately for other, began in list(_waiting.items()) if other is not reader)


def _buffer(length: int) -> bytearray | mmap.mmap:
    """A writable buffer for a record's `length` bytes (see the module doc)."""
    if length <= allocator.MMAP_THRESHOLD_BYTES:
        return bytearray(length)
    try:
        return mmap.mmap(-1, length, flags=mmap.MAP_PRIVATE)
    except (OSError, OverflowError) as e:
        raise ValueError(f"a record of {length} bytes is longer than this process can "
                         f"hold ({e})") from e
