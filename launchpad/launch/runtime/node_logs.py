"""Reading a node's log: the one place that opens the file a launcher's terminal keeps of a
node's output (`NodeOutput.terminal.log_of(name)`, terminals.py). The controller's
`read_log` reads through it, for the protocol (`launchpad logs`) and for the dashboard's
tail of a log alike."""

from __future__ import annotations

import os
import socket

from launchpad.launch.runtime.terminals import NodeOutput

MAX_READ = 1 << 20  # bytes of a node's log one read returns at most


def read(output: NodeOutput | None, name: str, offset: int, max_bytes: int) -> bytes:
    """Up to `max_bytes` (at most MAX_READ) of node `name`'s log from byte `offset` (a
    negative one counts from its end); b"" for a node that has written nothing yet.

    Raises:
      LookupError: the launch keeps no file of it (the message says where it goes).
    """
    if output is None:
        raise LookupError(f"its nodes write to the output of the process that launched them "
                          f"(pid {os.getpid()} on {socket.gethostname()})")
    path = output.terminal.log_of(name)
    try:
        with open(path, "rb") as log:
            start = offset if offset >= 0 else log.seek(0, os.SEEK_END) + offset
            log.seek(max(0, start))
            return log.read(max(0, min(max_bytes, MAX_READ)))
    except FileNotFoundError:  # nothing written yet
        return b""
