"""The launching process's view of a running agent: one live table, or plain lines.

It reads the counter node through its handle, once a second, until the program ends: on a
terminal a `rich` table redrawn in place; otherwise (a log, a pipe, CI) a plain line every
`PLAIN_EVERY_SECS`. Reading never stops the program: a counter that is gone (the program
stopping) ends the view.
"""

from __future__ import annotations

import collections
import sys
import time

REFRESH_SECS = 1.0
RATE_WINDOW_SECS = 10.0
PLAIN_EVERY_SECS = 10.0
COLUMNS = ("wall", "actor steps", "learner steps", "actor steps/s", "replay", "return")


class _Rate:
    """Actor steps per second over the last RATE_WINDOW_SECS (actors count whole episodes,
    so a rate over one refresh would jump between 0 and an episode per second)."""

    def __init__(self):
        self._samples: collections.deque = collections.deque()

    def __call__(self, wall_s: float, steps: float) -> float:
        self._samples.append((wall_s, steps))
        while len(self._samples) > 2 and wall_s - self._samples[1][0] >= RATE_WINDOW_SECS:
            self._samples.popleft()
        (then, before), (now, after) = self._samples[0], self._samples[-1]
        return (after - before) / (now - then) if now > then else 0.0


def _row(counts: dict, rate: _Rate) -> list[str]:
    """The table's cells for `counts`."""
    actor_steps = counts.get("actor_steps", 0)
    latest = counts.get("latest_return")
    return [f"{counts['wall_s']:.0f} s", f"{actor_steps:,.0f}",
            f"{counts.get('learner_steps', 0):,.0f}", f"{rate(counts['wall_s'], actor_steps):,.0f}",
            f"{counts.get('replay_size', 0):,.0f}", "-" if latest is None else f"{latest:.0f}"]


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
    rate, shown_at = _Rate(), 0.0
    while not _ended(controller):
        if time.monotonic() - shown_at < PLAIN_EVERY_SECS:
            continue
        counts = read_counts(counter)
        if counts is None:
            continue
        cells = _row(counts, rate)
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

    rate, history, last_evaluations = _Rate(), [], 0
    with Live(table(None, history), refresh_per_second=2, transient=False) as view:
        while not _ended(controller):
            counts = read_counts(counter)
            if counts is None:
                continue
            cells = _row(counts, rate)
            if counts["evaluations"] > last_evaluations:
                history.append(cells)  # a row kept per evaluation: the curve, as it grows
                last_evaluations = counts["evaluations"]
            view.update(table(None if history and cells is history[-1] else cells, history))
