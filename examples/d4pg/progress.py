"""The launching process's view of a running agent: one live table, or plain lines.

It reads the counter node through its handle, once a second, until the program ends: on a
terminal a `rich` table redrawn in place; otherwise (a log, a pipe, CI) a plain line every
`PLAIN_EVERY_SECS`. Reading never stops the program: a counter that is gone (the program
stopping) ends the view.
"""

from __future__ import annotations

import sys
import time

REFRESH_SECS = 1.0
PLAIN_EVERY_SECS = 10.0
COLUMNS = ("wall", "actor steps", "learner steps", "steps/s", "replay", "return")


def _row(counts: dict, previous: tuple[float, float] | None) -> tuple[list[str], tuple]:
    """The table's cells for `counts`, and what the next row needs for its rate."""
    now, actor_steps = counts["wall_s"], counts.get("actor_steps", 0)
    rate = ((actor_steps - previous[1]) / max(now - previous[0], 1e-9) if previous else 0.0)
    latest = counts.get("latest_return")
    cells = [f"{now:.0f} s", f"{actor_steps:,.0f}", f"{counts.get('learner_steps', 0):,.0f}",
             f"{rate:,.0f}", f"{counts.get('replay_size', 0):,.0f}",
             "-" if latest is None else f"{latest:.0f}"]
    return cells, (now, actor_steps)


def read_counts(counter) -> dict | None:
    """The counter's counts; None once it is gone (the program stopping)."""
    try:
        return counter.get_counts()
    except Exception:  # noqa: BLE001 - the counter is gone: the program is stopping
        return None


def follow(controller, counter, max_actor_steps: int, live: bool | None = None) -> None:
    """Shows the agent's progress until `controller`'s program ends (its failure, if any,
    is left for `controller.wait()` to raise)."""
    live = sys.stdout.isatty() if live is None else live
    if live:
        _follow_live(controller, counter, max_actor_steps)
    else:
        _follow_plain(controller, counter, max_actor_steps)


def _ended(controller) -> bool:
    try:
        return controller.wait(timeout=REFRESH_SECS)
    except Exception:  # noqa: BLE001 - a node failed: the caller's wait() raises it
        return True


def _follow_plain(controller, counter, max_actor_steps: int) -> None:
    previous, shown_at = None, 0.0
    while not _ended(controller):
        if time.monotonic() - shown_at < PLAIN_EVERY_SECS:
            continue
        counts = read_counts(counter)
        if counts is None:
            continue
        cells, previous = _row(counts, previous)
        shown_at = time.monotonic()
        print("d4pg: " + ", ".join(f"{name} {cell}" for name, cell in zip(
            COLUMNS, cells, strict=True)) + f" (of {max_actor_steps:,} actor steps)",
            flush=True)


def _follow_live(controller, counter, max_actor_steps: int) -> None:
    from rich.live import Live
    from rich.table import Table

    def table(cells: list[str] | None, history: list[list[str]]) -> Table:
        view = Table(title=f"D4PG on Pendulum-v1: {max_actor_steps:,} actor steps")
        for name in COLUMNS:
            view.add_column(name, justify="right")
        for row in history[-8:]:
            view.add_row(*row, style="dim")
        if cells:
            view.add_row(*cells, style="bold")
        return view

    previous, history, last_evaluations = None, [], 0
    with Live(table(None, history), refresh_per_second=2, transient=False) as view:
        while not _ended(controller):
            counts = read_counts(counter)
            if counts is None:
                continue
            cells, previous = _row(counts, previous)
            if counts["evaluations"] > last_evaluations and last_evaluations:
                history.append(cells)  # a row kept per new evaluation: the curve, as it grows
            last_evaluations = counts["evaluations"]
            view.update(table(cells, history))
