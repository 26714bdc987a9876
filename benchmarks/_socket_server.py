"""Raw socket echo server: the floor the courier benchmark measures against.

Run as `python -m benchmarks._socket_server [--host H]`: binds a free TCP port on H
(127.0.0.1 by default), prints it on one stdout line, then serves until its stdin is closed
(so it exits with its parent, even one that was killed). Each connection gets a thread that
reads length-prefixed messages (an 8-byte length, then the bytes) and writes each back
unchanged: the least any Python RPC must do, so no Python RPC between two processes can be
faster.
"""

from __future__ import annotations

import socket
import struct
import sys
import threading

LENGTH = struct.Struct(">Q")


def read_exactly(sock: socket.socket, size: int) -> bytearray:
    """Reads `size` bytes; raises ConnectionError if the peer closes first."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        received = sock.recv_into(view[got:], size - got)
        if not received:
            raise ConnectionError("the peer closed the connection")
        got += received
    return buffer


def _echo(connection: socket.socket) -> None:
    with connection:
        try:
            while True:
                (size,) = LENGTH.unpack(read_exactly(connection, LENGTH.size))
                connection.sendall(LENGTH.pack(size) + read_exactly(connection, size))
        except ConnectionError:
            return


def _accept(listener: socket.socket) -> None:
    while True:
        try:
            connection, _ = listener.accept()
        except OSError:
            return
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_echo, args=(connection,), daemon=True).start()


def main() -> None:
    host = sys.argv[sys.argv.index("--host") + 1] if "--host" in sys.argv else "127.0.0.1"
    listener = socket.create_server((host, 0))
    threading.Thread(target=_accept, args=(listener,), daemon=True).start()
    print(listener.getsockname()[1], flush=True)
    sys.stdin.read()  # Returns when the parent closes our stdin (or exits).
    listener.close()


if __name__ == "__main__":
    main()
