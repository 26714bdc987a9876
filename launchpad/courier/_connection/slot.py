"""A client's connection, held: opened on first use, replaced once broken, closed once."""

from __future__ import annotations

import threading
from collections.abc import Callable

from launchpad.courier import errors
from launchpad.courier._connection.connection import Connection


class ConnectionSlot:
    """Holds a client's current connection; replaces it when broken; closes it once."""

    def __init__(self):
        self.connection: Connection | None = None
        self._lock = threading.Lock()
        self._closed_because: str | None = None

    def get(self, open_connection: Callable[[], Connection]) -> Connection:
        with self._lock:
            if self._closed_because is not None:
                raise errors.ClientClosedError(
                    f"Courier client is closed: {self._closed_because}")
            if self.connection is None or self.connection.broken:
                self.connection = open_connection()
            return self.connection

    def close(self, why: str) -> None:
        with self._lock:
            if self._closed_because is None:
                self._closed_because = why
            current, self.connection = self.connection, None
        if current is not None:
            current.close(errors.ClientClosedError(why))
