"""The agent's bookkeeping: a counter node, and a step limiter that stops the program.

The counter is Acme's `Counter` as a node: actors and the learner add to named counts (actor
steps, learner steps) and set values (replay size, losses); the evaluator records each
average return, and the counter keeps the learning curve (one row per evaluation: the counts
then, the wall time, the return) and writes it to `<output_dir>/curve.json` as it grows, so
the curve survives the program. It also keeps the program's changes (`record_event`: the
actor group scaled while it learns), written to `<output_dir>/events.json`, which the curve's
picture marks.
"""

from __future__ import annotations

import collections
import json
import os
import threading
import time

import launchpad as lp

CURVE_FILE = "curve.json"
EVENTS_FILE = "events.json"
POLL_SECS = 1.0  # how often the limiter reads the counts


class Counter:
    """Counts and values of the whole program, and its learning curve."""

    def __init__(self, output_dir: str | None, started_at: float):
        self._output_dir = output_dir
        self._started_at = started_at  # time.time() when the program was made
        self._lock = threading.Lock()
        self._counts: dict[str, float] = collections.defaultdict(float)
        self._values: dict[str, float] = {}
        self._curve: list[dict] = []
        self._events: list[dict] = []

    def increment(self, **deltas: float) -> None:
        with self._lock:
            for name, delta in deltas.items():
                self._counts[name] += delta

    def set(self, **values: float) -> None:
        with self._lock:
            self._values.update(values)

    def get_counts(self) -> dict:
        """Counts and values, the evaluations so far, the latest return and the wall time."""
        with self._lock:
            latest = self._curve[-1]["return"] if self._curve else None
            return {**self._values, **self._counts, "evaluations": len(self._curve),
                    "latest_return": latest, "wall_s": time.time() - self._started_at}

    def record_evaluation(self, average_return: float) -> None:
        self._record(self._curve, CURVE_FILE, {"return": average_return})

    def get_curve(self) -> list[dict]:
        with self._lock:
            return list(self._curve)

    def record_event(self, event: str, **details: float) -> None:
        """A change of the program (`event`, e.g. "actors 2 -> 6") at the counts of now."""
        self._record(self._events, EVENTS_FILE, {"event": event, **details})

    def get_events(self) -> list[dict]:
        with self._lock:
            return list(self._events)

    def _record(self, rows: list[dict], file_name: str, row: dict) -> None:
        """Appends `row`, with the counts and wall time of now, to `rows`, and writes them."""
        with self._lock:
            rows.append({"actor_steps": int(self._counts["actor_steps"]),
                         "learner_steps": int(self._counts["learner_steps"]),
                         "wall_s": round(time.time() - self._started_at, 2), **row})
            written = list(rows)
        if self._output_dir:
            _write_json(os.path.join(self._output_dir, file_name), written)


def _write_json(path: str, value) -> None:
    """Writes `value` to `path` whole or not at all (a reader never sees half a file)."""
    partial = f"{path}.partial"
    with open(partial, "w") as f:
        json.dump(value, f, indent=1)
    os.replace(partial, path)


def stop_after(counter, count: str, limit: float, final_evaluation_secs: float) -> None:
    """The step limiter: once `counter`'s `count` reaches `limit`, waits (at most
    `final_evaluation_secs`) for one more evaluation, of the policy as it ended, then stops
    the program."""
    stop = lp.stop_event()
    while not stop.wait(POLL_SECS):
        counts = counter.get_counts()
        if counts.get(count, 0) >= limit:
            break
    else:
        return  # stopped by someone else
    print(f"limiter: {count} reached {limit:,.0f}; stopping after one more evaluation",
          flush=True)
    evaluations = counts["evaluations"]
    deadline = time.monotonic() + final_evaluation_secs
    while counter.get_counts()["evaluations"] <= evaluations and time.monotonic() < deadline:
        if stop.wait(POLL_SECS):
            return
    lp.stop()
