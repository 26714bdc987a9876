"""What travels on courier's sockets (the Unix socket and the TCP port): records
(records.py) of a hello, its answer, messages and a status.

A stream opens with the client's hello, `LPC1`, its token and its shared-memory probe,
sent with its first message. The server looks only at the hello (within 5 s, with no
thread held meanwhile: socket_server.py; a peer that connects and says nothing is let go, and
costs nothing after), checks the token, answers with its own probe (or ends the stream as
refused), and only then reads messages. The server ends a stream with a status record
(a status code, _status.py, and its details), so calls fail here as they would over gRPC.
"""

from __future__ import annotations

import socket
import struct

from launchpad.courier._sockets import records
from launchpad.courier._status import Status

MAGIC = b"LPC1"
# The kinds of record: the client's hello, the server's answer to it, a message (either
# way), the server's status that ends the stream.
HELLO, ANSWER, MESSAGE, STATUS = 1, 2, 3, 4
HELLO_MAX = 4096
MAX_MESSAGE = 1 << 62  # as over gRPC: a message is as long as its sender makes it
_FIELD = struct.Struct("<H")


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
    too: as the server compares tokens, dispatcher.Dispatcher.accepts_token)."""
    parts = [MAGIC]
    for field in (token.encode("utf-8", "surrogatepass"), probe.encode("utf-8", "surrogatepass")):
        parts += [_FIELD.pack(len(field)), field]
    return b"".join(parts)


def status(code: Status, details: str) -> bytes:
    return bytes([code]) + details.encode()


def status_of(body: bytes) -> tuple[Status, str]:
    """The code and details of a status record's bytes."""
    return Status.of(body[0]), body[1:].decode(errors="replace")
