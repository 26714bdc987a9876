"""A node's telemetry, sent to its controller every `telemetry.REPORT_SECS` (see telemetry.py).

One daemon thread per run of a node: it sums the call counters of the courier servers the
node made, adds its process's CPU time and memory (not for a node running as a thread of
another process, whose process is not its own), and sends them with the protocol's `report`.
A report that fails (the controller is busy, or gone) is skipped; the thread ends with the
node's stop.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from typing import Any

from launchpad import context, courier, telemetry


def start(node_context: context.NodeContext, instance: str, own_process: bool,
          sink: Any = None) -> None:
    """Starts reporting for run `instance` of `node_context`'s node, to its controller or
    to `sink` (a host agent's agent_relay.Relay, which passes it on)."""
    threading.Thread(target=_report_until_stop,
                     args=(node_context, instance, own_process,
                           sink or node_context.controller),
                     name=f"lp-telemetry-{node_context.name}", daemon=True).start()


def sample(node_context: context.NodeContext, own_process: bool) -> telemetry.NodeSample:
    """What the node measures of itself now."""
    methods = courier.summed_metrics([server.metrics.snapshot() for server in node_context.servers])
    if own_process:
        made = telemetry.sample_process(methods)
    else:
        made = telemetry.NodeSample(cpu_secs=None, memory_bytes=None, methods=methods)
    made.broadcast_errors = _broadcast_errors(node_context)
    return made


def _broadcast_errors(node_context: context.NodeContext) -> dict[str, int]:
    """Member -> broadcasts of the node's group clients that failed there (none: no entry)."""
    failed: collections.Counter[str] = collections.Counter()
    for group in list(node_context.groups):
        for member, count in group.broadcast_errors().items():
            if count:
                failed[member] += count
    return dict(failed)


def _report_until_stop(node_context: context.NodeContext, instance: str,
                       own_process: bool, controller: Any) -> None:
    while True:
        with contextlib.suppress(Exception):  # skipped: the next one may get through
            controller.report(node_context.label, node_context.index, instance,
                              sample(node_context, own_process), timeout=telemetry.REPORT_SECS)
        if node_context.stop_event.wait(telemetry.REPORT_SECS):  # the period, or the stop
            return
