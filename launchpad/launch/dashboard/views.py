"""What the dashboard's JSON answers hold: a program's status, and the end of a node's log.

The status is `Controller.status()` as plain JSON (dataclasses.asdict), less each method's
raw histogram (`/metrics` exports those), plus the server's clock (`now`), against which the
page reads the times in it. `log_tail` is the end of a node's log, read as `launchpad logs`
reads it (the controller's read_log).
"""

from __future__ import annotations

import dataclasses
import json
import time

from launchpad import telemetry
from launchpad.launch.runtime.controller import Controller

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
    where the launch keeps no logs (local_mp and Slurm keep one, tmux_session none): read
    through the controller's read_log, as `launchpad logs` reads it."""
    label, _, index = name.rpartition("/")
    try:
        data, _ = controller.read_log(label, int(index), -max_bytes - 1, max_bytes + 1)
    except LookupError:
        return None
    if len(data) > max_bytes:
        data = data[1:].partition(b"\n")[2]  # from the first whole line
    return data.decode("utf-8", errors="replace")
