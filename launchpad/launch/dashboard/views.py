"""What the dashboard's JSON answers hold: a program's status, and the end of a node's log.

The status is `Controller.status()` as plain JSON (dataclasses.asdict), less each method's
raw histogram (`/metrics` exports those), plus the server's clock (`now`), against which the
page reads the times in it. A node's log is read by `log_tail`, the one place that knows
where logs are kept.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

from launchpad import telemetry
from launchpad.launch.controller import Controller

LOG_TAIL_BYTES = 64 * 1024  # how much of the end of a node's log the page shows


def status_json(status: telemetry.ProgramStatus) -> bytes:
    """`status` as the page reads it (see the module doc)."""
    data = dataclasses.asdict(status)
    for node in data["nodes"]:
        for method in node["methods"].values():
            del method["counts"]
    data["now"] = time.time()
    return json.dumps(data).encode()


def log_tail(controller: Controller, name: str,
             max_bytes: int = LOG_TAIL_BYTES) -> str | None:
    """The last `max_bytes` (whole lines) of node `name`'s log ('label/index'), or None
    where the launch keeps no logs; '' for a node that has written nothing. Read from the
    file its launcher's terminal keeps of the node's output (`controller.node_output`, as the
    protocol's read_log: local_mp and Slurm keep one, tmux_session none: terminals.py)."""
    if controller.node_output is None:
        return None
    try:
        path = controller.node_output.log_of(name)
    except LookupError:
        return None
    try:
        with open(path, "rb") as log:
            size = log.seek(0, os.SEEK_END)
            log.seek(max(0, size - max_bytes))
            tail = log.read(max_bytes)
    except FileNotFoundError:
        return ""
    if size > max_bytes:
        tail = tail.partition(b"\n")[2]  # from the first whole line
    return tail.decode("utf-8", errors="replace")
