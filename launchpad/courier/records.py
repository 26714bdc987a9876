"""Length-prefixed records on a stream socket: how the local transport frames its messages.

A record is a 9-byte header, `<B kind><Q length>`, then `length` bytes. A record is sent
with one `sendmsg` of its header and its chunks (scatter-gather: a message's out-of-band
buffers, numpy array data among them, go from where they lie to the kernel with no join).
It is received through a small buffer that takes whole small records in one system call; a
large one is read straight into a buffer of its own size, which the message's frames then
view (read-only, like a gRPC message's bytes), so a received array is never copied again.
"""

from __future__ import annotations

import socket
import struct

_HEADER = struct.Struct("<BQ")
HEADER_SIZE = _HEADER.size
# A small record is copied out of the receive buffer; a larger one gets a buffer of its own.
_BUFFER = 64 << 10
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
    (raise it once the peer is known)."""

    def __init__(self, sock: socket.socket, max_length: int):
        self._sock = sock
        self.max_length = max_length
        self._buffer = bytearray(_BUFFER)
        self._view = memoryview(self._buffer)
        self._start = 0
        self._end = 0

    def read(self) -> tuple[int, bytes | memoryview]:
        """The next record's kind and bytes.

        Raises:
          EOFError: the peer closed the connection (before a record, or inside one).
          ValueError: a record longer than `max_length`.
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
        received = self._sock.recv_into(self._view[self._end:])
        if not received:
            raise EOFError("the peer closed the connection")
        self._end += received

    def _read_large(self, length: int) -> memoryview:
        out = bytearray(length)
        view = memoryview(out)
        got = min(length, self._end - self._start)
        view[:got] = self._view[self._start:self._start + got]
        self._start += got
        while got < length:
            received = self._sock.recv_into(view[got:])
            if not received:
                raise EOFError("the peer closed the connection inside a record")
            got += received
        return view.toreadonly()
