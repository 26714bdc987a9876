"""A program's status as text: the node table's columns and cells, and its caption.

One table for every place a status is shown (`launchpad status`, the `--lp_status` live
table): each node's name, type, state, where it runs, restarts, uptime, CPU, memory, and its
calls summed over its methods (per second, errors, the slowest method's p50 and p99).
"""

from __future__ import annotations

import time

from launchpad import telemetry

COLUMNS = ("node", "kind", "state", "host", "pid", "restarts", "uptime", "cpu", "memory",
           "calls/s", "errors", "p50", "p99")
# What fits a terminal 80 columns wide (the live table).
COMPACT = ("node", "state", "restarts", "uptime", "cpu", "memory", "calls/s", "errors", "p99")
LEFT = frozenset({"node", "kind", "state", "host"})
_NONE = "-"
SHOWN_CHANGES = 5  # the program's latest changes (scale, apply) under its table


def cells(node: telemetry.NodeStatus) -> dict[str, str]:
    """The row of `node`: column (of COLUMNS) -> its text."""
    methods = node.methods.values()
    calls_per_sec = sum(m.calls_per_sec for m in methods)
    errors = sum(m.errors for m in methods)
    p50 = max((m.p50_secs for m in methods if m.p50_secs is not None), default=None)
    p99 = max((m.p99_secs for m in methods if m.p99_secs is not None), default=None)
    return dict(zip(COLUMNS, [
        node.name, node.kind, node.state, node.host or _NONE,
        str(node.pid) if node.pid else _NONE, str(node.restarts), duration(node.uptime_secs),
        _NONE if node.cpu_percent is None else f"{node.cpu_percent:.0f}%",
        size(node.memory_bytes), f"{calls_per_sec:.1f}" if methods else _NONE,
        str(errors) if methods else _NONE, latency(p50), latency(p99)], strict=True))


def caption(status: telemetry.ProgramStatus) -> str:
    """What to say under the table: why the program stopped, each node's last failure, the
    program's latest changes, and where the logs are."""
    lines = []
    if status.failure:
        lines.append(f"failed: {status.failure.splitlines()[0]}")
    elif status.stop_reason:
        lines.append(f"stopped: {status.stop_reason}")
    elif status.state == "pending":
        lines.append(f"pending: {status.pending}")
    for node in status.nodes:
        if node.failures:
            last = node.failures[-1]
            restarted = " (restarted)" if last.restarted else ""
            lines.append(f"{node.name}: {last.reason}{restarted}")
        if node.broadcast_errors:
            failed = ", ".join(f"{member} {count}" for member, count
                               in sorted(node.broadcast_errors.items()))
            lines.append(f"{node.name}: broadcasts that failed: {failed}")
    for change in status.changes[-SHOWN_CHANGES:]:
        lines.append(f"changed {time.strftime('%H:%M:%S', time.localtime(change.at))}: "
                     f"{change.what}")
    if status.log_dir:
        lines.append(f"logs: {status.log_dir}")
    return "\n".join(lines)


def render(status: telemetry.ProgramStatus) -> str:
    """The whole table as aligned plain text, with its caption."""
    rows = [list(COLUMNS)] + [list(cells(node).values()) for node in status.nodes]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = [f"{status.program} ({status.launch_type}, run {status.run_id or _NONE}): "
             f"{status.state}"]
    for row in rows:
        lines.append("  ".join(c.ljust(w) if name in LEFT else c.rjust(w)
                               for name, c, w in zip(COLUMNS, row, widths, strict=True))
                     .rstrip())
    text = caption(status)
    return "\n".join(lines + ([text] if text else []))


def duration(secs: float | None) -> str:
    """12s, 3m04s, 2h05m."""
    if secs is None:
        return _NONE
    secs = int(secs)
    if secs < 60:
        return f"{secs}s"
    if secs < 3600:
        return f"{secs // 60}m{secs % 60:02d}s"
    return f"{secs // 3600}h{secs % 3600 // 60:02d}m"


def size(count: int | None) -> str:
    """Bytes in binary units: 812K, 34M, 1.2G."""
    if count is None:
        return _NONE
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if count >= scale:
            value = count / scale
            return f"{value:.1f}{unit}" if value < 10 else f"{value:.0f}{unit}"
    return f"{count}B"


def latency(secs: float | None) -> str:
    """25us, 2.5ms, 1.2s: a histogram bucket's bound."""
    if secs is None:
        return _NONE
    if secs < 1e-3:
        return f"{secs * 1e6:.0f}us"
    if secs < 1.0:
        return f"{secs * 1e3:g}ms"
    return f"{secs:g}s"
