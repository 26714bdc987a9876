"""The current terminal's pump: one thread that copies the lines of every node's pipe to the
launcher's stdout, each with the node's prefix, and to the node's log.

A partial line waits for its end (a very long one is shown anyway); a pipe's end flushes
what is left of it. Writing never blocks a node on a stdout that has gone.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import threading
from typing import TextIO


class LinePump:
    """One thread that copies lines from many pipes to one stream, each with its prefix."""

    def __init__(self, out: TextIO):
        self._out = out
        self._selector = selectors.DefaultSelector()
        self._wake_read, self._wake_write = os.pipe()
        self._selector.register(self._wake_read, selectors.EVENT_READ, None)
        self._lock = threading.Lock()
        self._added: list[tuple[int, tuple[str, int | None, str]]] = []
        self._open_pipes = 0
        self._open_by_name: dict[str, int] = {}
        self._closing = False
        self._all_closed = threading.Condition(self._lock)
        self._thread = threading.Thread(target=self._run, name="lp-output", daemon=True)
        self._thread.start()

    def add(self, fd: int, prefix: str, log: int | None, name: str) -> None:
        """Copies the lines of pipe `fd` (node `name`'s) with `prefix`, and to the file `log`
        if given (both closed at the pipe's end)."""
        with self._lock:
            self._added.append((fd, (prefix, log, name)))
            self._open_pipes += 1
            self._open_by_name[name] = self._open_by_name.get(name, 0) + 1
        os.write(self._wake_write, b"+")

    def writing(self, name: str) -> bool:
        """Whether a pipe of node `name` is still open (its output not all copied yet)."""
        with self._lock:
            return self._open_by_name.get(name, 0) > 0

    def close(self, timeout: float) -> None:
        """Waits (bounded) for every pipe to reach its end, then stops the thread."""
        with self._lock:
            self._all_closed.wait_for(lambda: self._open_pipes == 0, timeout)
            self._closing = True
        os.write(self._wake_write, b"x")
        self._thread.join(timeout)

    def _run(self) -> None:
        partial: dict[int, bytes] = {}
        while True:
            for key, _ in self._selector.select():
                if key.fd == self._wake_read:
                    os.read(self._wake_read, 1024)
                    if self._take_added(partial):
                        return
                    continue
                data = os.read(key.fd, 65536)
                if data:
                    self._write(key.data, partial, key.fd, data)
                else:
                    self._end(key, partial)

    def _take_added(self, partial: dict[int, bytes]) -> bool:
        """Registers pipes added since; True when the pump is to stop."""
        with self._lock:
            added, self._added = self._added, []
            closing = self._closing
        for fd, where in added:
            partial[fd] = b""
            self._selector.register(fd, selectors.EVENT_READ, where)
        if closing:
            for key in list(self._selector.get_map().values()):
                if key.fd != self._wake_read:
                    self._end(key, partial)
            self._selector.close()
            os.close(self._wake_read)
            os.close(self._wake_write)
        return closing

    def _write(self, where: tuple[str, int | None, str], partial: dict[int, bytes], fd: int,
               data: bytes) -> None:
        *lines, rest = (partial[fd] + data).split(b"\n")
        if len(rest) > 65536:  # a very long line without an end: show it anyway
            lines.append(rest)
            rest = b""
        partial[fd] = rest
        if lines:
            self._emit(where, lines)

    def _end(self, key: selectors.SelectorKey, partial: dict[int, bytes]) -> None:
        rest = partial.pop(key.fd, b"")
        if rest:
            self._emit(key.data, [rest])
        self._selector.unregister(key.fd)
        os.close(key.fd)
        if key.data[1] is not None:
            os.close(key.data[1])
        with self._lock:
            self._open_pipes -= 1
            self._open_by_name[key.data[2]] -= 1
            self._all_closed.notify_all()

    def _emit(self, where: tuple[str, int | None, str], lines: list[bytes]) -> None:
        prefix, log, _ = where
        if log is not None:
            with contextlib.suppress(OSError):  # a full disk must not stop the output
                os.write(log, b"".join(line + b"\n" for line in lines))
        text = "".join(f"{prefix}{line.decode(errors='replace')}\n" for line in lines)
        try:
            self._out.write(text)
            self._out.flush()
        except (OSError, ValueError):
            pass  # the launcher's stdout is gone; the node must not block on it
