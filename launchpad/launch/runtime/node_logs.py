"""Reading a node's log: the one place that opens the file a launcher's terminal keeps of a
node's output (`controller.node_output.log_of(name)`, terminals.py), for the protocol's
`read_log` (`launchpad logs`) and for the dashboard's tail of it."""

from __future__ import annotations

import os
from typing import Any

MAX_READ = 1 << 20  # bytes of a node's log one read returns at most


def read(node_output: Any, name: str, offset: int, max_bytes: int) -> bytes:
    """Up to `max_bytes` (at most MAX_READ) of node `name`'s log from byte `offset`; b""
    for a node that has written nothing yet.

    Raises:
      LookupError: its terminal keeps no file of it (the message says where it goes).
    """
    path = node_output.log_of(name)
    try:
        with open(path, "rb") as log:
            log.seek(max(0, offset))
            return log.read(max(0, min(max_bytes, MAX_READ)))
    except FileNotFoundError:  # nothing written yet
        return b""


def tail(node_output: Any, name: str, max_bytes: int) -> str | None:
    """The last `max_bytes` (whole lines) of node `name`'s log, or None where its terminal
    keeps no file of it; '' for a node that has written nothing."""
    try:
        path = node_output.log_of(name)
    except LookupError:
        return None
    try:
        with open(path, "rb") as log:
            size = log.seek(0, os.SEEK_END)
            log.seek(max(0, size - max_bytes))
            text = log.read(max_bytes)
    except FileNotFoundError:
        return ""
    if size > max_bytes:
        text = text.partition(b"\n")[2]  # from the first whole line
    return text.decode("utf-8", errors="replace")
