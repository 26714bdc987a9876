"""Per-method call metrics of a courier server: cheap counters, read by whoever asks.

Every call a server answers is counted under its method's name: calls, errors (the method
raised, or its arguments could not be loaded) and its duration in a log-linear histogram
(_histogram.py: percentiles within 3.1% from 1 us to an hour), so that processes can sum
histograms and anyone can read percentiles or export them (Prometheus) without keeping each
duration. Recording costs one uncontended lock and a few integer operations (under a
microsecond, against a call's tens: benchmarks/telemetry_overhead.py). Calls of a method the
object does not have count under `UNKNOWN_METHOD`, so a client cannot grow the table without
bound.
"""

from __future__ import annotations

import collections
import dataclasses
import threading

from launchpad.courier import _histogram

UNKNOWN_METHOD = "(unknown method)"


@dataclasses.dataclass
class MethodCounts:
    """What one method's calls came to: counts since the server started, and the histogram
    of their durations (`buckets[b]` calls took a duration of histogram bucket `b`; buckets
    without calls are left out)."""

    calls: int = 0
    errors: int = 0
    total_secs: float = 0.0
    buckets: dict[int, int] = dataclasses.field(default_factory=dict)

    def add(self, other: MethodCounts) -> None:
        """Adds `other`'s calls to these (the servers of a node, summed)."""
        self.calls += other.calls
        self.errors += other.errors
        self.total_secs += other.total_secs
        summed = collections.Counter(self.buckets)
        summed.update(other.buckets)
        self.buckets = dict(summed)

    def minus(self, earlier: MethodCounts) -> MethodCounts:
        """The calls made since `earlier` (a snapshot of the same counter)."""
        since = {bucket: count - earlier.buckets.get(bucket, 0)
                 for bucket, count in self.buckets.items()}
        return MethodCounts(self.calls - earlier.calls, self.errors - earlier.errors,
                            self.total_secs - earlier.total_secs,
                            {bucket: count for bucket, count in since.items() if count})

    def percentile(self, fraction: float) -> float | None:
        """The duration under which `fraction` of the calls took, in seconds, within 3.1%
        (_histogram.percentile); None without calls."""
        return _histogram.percentile(self.buckets, fraction)


class CallMetrics:
    """The counters of one server, by method name (thread-safe)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._methods: dict[str, MethodCounts] = {}

    def record(self, method: str, secs: float, failed: bool) -> None:
        """Counts one answered call of `method` that took `secs`."""
        bucket = _histogram.bucket_of(secs)
        with self._lock:
            counts = self._methods.get(method)
            if counts is None:  # (its buckets count up from 0 by themselves)
                counts = self._methods[method] = MethodCounts(
                    buckets=collections.defaultdict(int))
            counts.calls += 1
            if failed:
                counts.errors += 1
            counts.total_secs += secs
            counts.buckets[bucket] += 1

    def is_quick(self, method: str, mean_secs: float, calls: int) -> bool:
        """Whether `method` has answered `calls` calls or more, in `mean_secs` or less on
        average (read without the lock: a guess, good enough for call_batches.py)."""
        counts = self._methods.get(method)
        return (counts is not None and counts.calls >= calls
                and counts.total_secs <= mean_secs * counts.calls)

    def snapshot(self) -> dict[str, MethodCounts]:
        """A copy of every method's counts now."""
        with self._lock:
            return {name: MethodCounts(c.calls, c.errors, c.total_secs, dict(c.buckets))
                    for name, c in self._methods.items()}


def summed(snapshots: list[dict[str, MethodCounts]]) -> dict[str, MethodCounts]:
    """The counts of several servers' snapshots, method by method."""
    total: dict[str, MethodCounts] = {}
    for snapshot in snapshots:
        for name, counts in snapshot.items():
            total.setdefault(name, MethodCounts()).add(counts)
    return total
