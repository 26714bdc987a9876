"""Per-method call metrics of a courier server: cheap counters, read by whoever asks.

Every call a server answers is counted under its method's name: calls, errors (the method
raised, or its arguments could not be loaded) and its duration in a histogram of fixed
bounds (`LATENCY_BOUNDS_SECS`, 25 us to 60 s, about four per decade), so that processes can
sum histograms and anyone can read percentiles or export them (Prometheus) without keeping
each duration. Recording costs one uncontended lock and a bisect (about a microsecond,
against a call's tens: benchmarks/telemetry_overhead.py). Calls of a method the object does
not have count under `UNKNOWN_METHOD`, so a client cannot grow the table without bound.
"""

from __future__ import annotations

import bisect
import dataclasses
import threading

# Upper bounds of the histogram's buckets, in seconds; one more bucket holds what is slower.
LATENCY_BOUNDS_SECS: tuple[float, ...] = (
    25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 0.1,
    0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
UNKNOWN_METHOD = "(unknown method)"


@dataclasses.dataclass
class MethodCounts:
    """What one method's calls came to: counts since the server started, and the histogram
    of their durations (`buckets[i]` calls took at most LATENCY_BOUNDS_SECS[i], and more
    than the bound before; the last bucket counts the slower ones)."""

    calls: int = 0
    errors: int = 0
    total_secs: float = 0.0
    buckets: list[int] = dataclasses.field(
        default_factory=lambda: [0] * (len(LATENCY_BOUNDS_SECS) + 1))

    def add(self, other: MethodCounts) -> None:
        """Adds `other`'s calls to these (the servers of a node, summed)."""
        self.calls += other.calls
        self.errors += other.errors
        self.total_secs += other.total_secs
        self.buckets = [a + b for a, b in zip(self.buckets, other.buckets, strict=True)]

    def minus(self, earlier: MethodCounts) -> MethodCounts:
        """The calls made since `earlier` (a snapshot of the same counter)."""
        return MethodCounts(self.calls - earlier.calls, self.errors - earlier.errors,
                            self.total_secs - earlier.total_secs,
                            [a - b for a, b in zip(self.buckets, earlier.buckets, strict=True)])

    def percentile(self, fraction: float) -> float | None:
        """The duration under which `fraction` of the calls took, in seconds (the upper
        bound of the bucket it falls in; the slowest bucket reads as its lower bound);
        None without calls."""
        if not 0.0 < fraction <= 1.0:
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        counted = sum(self.buckets)
        if not counted:
            return None
        wanted = fraction * counted
        seen = 0
        for bound, count in zip(LATENCY_BOUNDS_SECS, self.buckets, strict=False):
            seen += count
            if seen >= wanted:
                return bound
        return LATENCY_BOUNDS_SECS[-1]


class CallMetrics:
    """The counters of one server, by method name (thread-safe)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._methods: dict[str, MethodCounts] = {}

    def record(self, method: str, secs: float, failed: bool) -> None:
        """Counts one answered call of `method` that took `secs`."""
        bucket = bisect.bisect_left(LATENCY_BOUNDS_SECS, secs)
        with self._lock:
            counts = self._methods.get(method)
            if counts is None:
                counts = self._methods[method] = MethodCounts()
            counts.calls += 1
            counts.errors += failed
            counts.total_secs += secs
            counts.buckets[bucket] += 1

    def snapshot(self) -> dict[str, MethodCounts]:
        """A copy of every method's counts now."""
        with self._lock:
            return {name: MethodCounts(c.calls, c.errors, c.total_secs, list(c.buckets))
                    for name, c in self._methods.items()}


def summed(snapshots: list[dict[str, MethodCounts]]) -> dict[str, MethodCounts]:
    """The counts of several servers' snapshots, method by method."""
    total: dict[str, MethodCounts] = {}
    for snapshot in snapshots:
        for name, counts in snapshot.items():
            total.setdefault(name, MethodCounts()).add(counts)
    return total
