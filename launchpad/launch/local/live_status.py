"""`--lp_status`: a compact live table of the program's nodes in the launching terminal.

Under the local launchers, when the launching process's output is a terminal, a `rich` table
(the `status` extra) redrawn every second from the controller's status: each node's state,
restarts, uptime, CPU, memory and call rates. It is off when the output is not a terminal (a
log, a pipe), since a redrawn table there is only noise (launch/options.py decides). Nodes
printing to the launching process's stdout (threads under local_mt) print above the table;
under local_mp the nodes' output goes to their log files (`terminal="output_to_files"`,
unless a terminal is given), whose folder the last table names.
"""

from __future__ import annotations

import threading

from launchpad import telemetry
from launchpad.launch.runtime import status_text

_REFRESH_SECS = 1.0
_STATE_STYLES = {"starting": "yellow", "running": "green", "restarting": "magenta",
                 "stopped": "dim", "failed": "bold red"}


def start(controller) -> None:
    """Shows `controller`'s program live until it has ended (a daemon thread)."""
    try:
        from rich.console import Console
        from rich.live import Live
    except ImportError as e:
        raise ImportError("--lp_status needs rich: pip install 'launchpad-next[status]'") from e
    ended = threading.Event()
    live = Live(table(controller.status()), console=Console(), refresh_per_second=4,
                redirect_stdout=True, redirect_stderr=True)
    live.start()

    def redraw() -> None:
        while not ended.wait(_REFRESH_SECS):  # the table's period, or the program's end
            live.update(table(controller.status()))

    def finish() -> None:
        ended.set()
        live.update(table(controller.status()))
        live.stop()

    thread = threading.Thread(target=redraw, name="lp-live-status", daemon=True)
    thread.start()
    controller.on_finish(finish)


def table(status: telemetry.ProgramStatus):
    """The rich Table of `status`."""
    from rich.table import Table
    from rich.text import Text

    caption = status_text.caption(status)
    result = Table(title=Text(f"{status.program} ({status.launch_type}): {status.state}"),
                   caption=Text(caption) if caption else None, caption_justify="left", expand=False,
                   title_justify="left", pad_edge=False, box=None)
    for column in status_text.COMPACT:
        result.add_column(column, justify="left" if column in status_text.LEFT else "right",
                          no_wrap=True, overflow="fold")
    for node in status.nodes:
        style = _STATE_STYLES.get(node.state, "")
        # Text, not markup: a node's name or failure is shown as it is.
        row = status_text.cells(node)
        result.add_row(*[Text(row[name], style=style if name == "state" else "")
                         for name in status_text.COMPACT])
    return result
