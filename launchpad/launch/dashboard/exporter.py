"""`/metrics`: a running program's status in Prometheus' text format.

A collector builds the metric families from `Controller.status()` each time it is scraped,
so nothing is kept or updated between scrapes. Every series has the labels `program`, `node`
('label/index'), `label` and `index`; the RPC series `method` too::

    launchpad_node_up                    1 while the node runs (its runner reported it started)
    launchpad_node_state{state}          1 for the node's state now, 0 for the other states
    launchpad_node_restarts_total        restarts by its group's RestartPolicy
    launchpad_node_failures_total        failures (restarted or not)
    launchpad_node_cpu_seconds_total     CPU time of its current run's process
    launchpad_node_memory_bytes          resident memory of that process
    launchpad_node_uptime_seconds        how long its current run has been running
    launchpad_rpc_calls_total            calls its courier servers answered, per method
    launchpad_rpc_errors_total           those that raised
    launchpad_rpc_latency_seconds        their durations: the upper bounds of the log-linear
                                         buckets that hold calls (courier/histogram.py)
    launchpad_broadcast_errors_total     broadcasts of the node's group calls that failed, per
                                         member (label `member`)

CPU, memory and the RPC counters start again from zero when a node restarts (a counter reset,
as Prometheus expects of a restarted process). prometheus-client is the `dashboard` extra,
imported when a dashboard starts (this module is imported then).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from launchpad import telemetry
from launchpad.courier import latency_histogram

try:
    import prometheus_client
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
    )
    from prometheus_client.utils import floatToGoString
except ImportError as e:
    raise ImportError("The dashboard's /metrics needs prometheus-client: "
                      "pip install 'launchpad-next[dashboard]'") from e

_NODE_LABELS = ["program", "node", "label", "index"]
CONTENT_TYPE = prometheus_client.CONTENT_TYPE_LATEST


class Exporter:
    """Renders `status()` (a program's status now) in Prometheus' text format."""

    def __init__(self, status: Callable[[], telemetry.ProgramStatus]):
        self._registry = prometheus_client.CollectorRegistry(auto_describe=False)
        self._registry.register(_Collector(status))

    def text(self) -> bytes:
        """Every series, now."""
        return prometheus_client.generate_latest(self._registry)


class _Collector:
    def __init__(self, status: Callable[[], telemetry.ProgramStatus]):
        self._status = status

    def collect(self) -> Iterator[Any]:
        status = self._status()
        rpc_labels = [*_NODE_LABELS, "method"]
        up = GaugeMetricFamily("launchpad_node_up", "1 while the node runs, else 0",
                               labels=_NODE_LABELS)
        state = GaugeMetricFamily("launchpad_node_state",
                                  "1 for the node's state now, 0 for the other states",
                                  labels=[*_NODE_LABELS, "state"])
        restarts = CounterMetricFamily("launchpad_node_restarts",
                                       "Restarts by the node's group's RestartPolicy",
                                       labels=_NODE_LABELS)
        failures = CounterMetricFamily("launchpad_node_failures",
                                       "Failures of the node, restarted or not",
                                       labels=_NODE_LABELS)
        cpu = CounterMetricFamily("launchpad_node_cpu_seconds",
                                  "CPU time of the node's current run's process",
                                  labels=_NODE_LABELS)
        memory = GaugeMetricFamily("launchpad_node_memory_bytes",
                                   "Resident memory of the node's current run's process",
                                   labels=_NODE_LABELS)
        uptime = GaugeMetricFamily("launchpad_node_uptime_seconds",
                                   "How long the node's current run has been running",
                                   labels=_NODE_LABELS)
        calls = CounterMetricFamily("launchpad_rpc_calls", "Calls the node answered",
                                    labels=rpc_labels)
        errors = CounterMetricFamily("launchpad_rpc_errors", "Calls that raised",
                                     labels=rpc_labels)
        latency = HistogramMetricFamily("launchpad_rpc_latency_seconds",
                                        "How long the node took to answer calls",
                                        labels=rpc_labels)
        broadcast_errors = CounterMetricFamily(
            "launchpad_broadcast_errors", "Broadcasts of the node's group calls that failed",
            labels=[*_NODE_LABELS, "member"])
        for node in status.nodes:
            labels = [status.program, node.name, node.label, str(node.index)]
            up.add_metric(labels, float(node.state == "running"))
            for name in telemetry.STATES:
                state.add_metric([*labels, name], float(node.state == name))
            restarts.add_metric(labels, node.restarts)
            failures.add_metric(labels, len(node.failures))
            if node.cpu_secs is not None:
                cpu.add_metric(labels, node.cpu_secs)
            if node.memory_bytes is not None:
                memory.add_metric(labels, node.memory_bytes)
            if node.uptime_secs is not None:
                uptime.add_metric(labels, node.uptime_secs)
            for method, method_status in node.methods.items():
                counts = method_status.counts
                calls.add_metric([*labels, method], counts.calls)
                errors.add_metric([*labels, method], counts.errors)
                latency.add_metric([*labels, method], _cumulative(counts.buckets),
                                   sum_value=counts.total_secs)
            for member, count in sorted(node.broadcast_errors.items()):
                broadcast_errors.add_metric([*labels, member], count)
        yield from (up, state, restarts, failures, cpu, memory, uptime, calls, errors, latency,
                    broadcast_errors)


def _cumulative(buckets: dict[int, int]) -> list[tuple[str, float]]:
    """A classic histogram's buckets: (le, calls at most that long), at the upper bound of
    each bucket that holds calls, then +Inf. Counts only grow, so a bound once exported stays
    (until a restart of the node resets its counters, as Prometheus expects)."""
    seen = 0
    cumulative = []
    for bucket in sorted(buckets):
        seen += buckets[bucket]
        upper = latency_histogram.bounds_of(bucket)[1]
        if upper != float("inf"):
            cumulative.append((floatToGoString(upper), seen))
    return [*cumulative, ("+Inf", seen)]
