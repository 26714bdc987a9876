"""What a running program says about itself: node samples, node status, program status.

Each node's runner sends its controller a `NodeSample` every `REPORT_SECS` (the controller
protocol's `report`): its process's CPU time and memory, and the call counters of the courier
servers the node made (courier/metrics.py), summed. The controller joins the samples with what
it knows itself (each node's state, host, pid, addresses, restarts, failures) into a
`ProgramStatus`, which `status()` returns - to `launchpad status`, the live table, the
dashboard and `/metrics` alike. All of them are plain picklable data.

Node states::

    starting    its launcher started it; its runner has not reported yet
    running     its runner reported it started
    restarting  it failed and its group's RestartPolicy restarts it
    stopped     it finished, or was ended by the program's stop
    failed      it failed for good
"""

from __future__ import annotations

import dataclasses
import os
import resource
import time

from launchpad.courier import MethodCounts, latency_histogram

REPORT_SECS = 2.0  # how often a node sends its sample
_BOUND = 1 << 63  # what a sample's counts, sizes, times and seconds stay below
STATES = ("starting", "running", "restarting", "stopped", "failed")


@dataclasses.dataclass
class NodeSample:
    """What a node measures of itself (cumulative since its run started).

    cpu_secs and memory_bytes are None for a node that runs as a thread of another
    process (local_mt): the process's figures are not its own.
    """

    cpu_secs: float | None
    memory_bytes: int | None
    methods: dict[str, MethodCounts]
    taken_at: float = dataclasses.field(default_factory=time.time)
    # Member name -> broadcasts of the node's group clients that failed there.
    broadcast_errors: dict[str, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Failure:
    """One failure of a node: why, its traceback (if the node sent one), when (unix time),
    and whether its group's policy restarted it."""

    reason: str
    traceback: str
    at: float
    restarted: bool


@dataclasses.dataclass
class MethodStatus:
    """One served method of a node: calls and errors so far, calls per second over the last
    report interval, and latency percentiles over the run (seconds; None without calls)."""

    calls: int
    errors: int
    calls_per_sec: float
    p50_secs: float | None
    p90_secs: float | None
    p99_secs: float | None
    counts: MethodCounts  # the raw counters (histogram), for exporters


@dataclasses.dataclass
class NodeStatus:
    """One node (or colocation: what runs, ends and restarts as one) of a running program."""

    name: str  # 'label/index'
    label: str
    index: int
    kind: str  # its node type: CourierNode, PyNode, ...
    state: str  # one of STATES
    host: str = ""  # where its current run runs, as it reported ('' before)
    pid: int = 0  # its process on that host (0: not known yet)
    addresses: dict[str, str] = dataclasses.field(default_factory=dict)  # name -> host:port
    restarts: int = 0
    started_at: float | None = None  # unix time its current run started
    uptime_secs: float | None = None
    cpu_secs: float | None = None
    cpu_percent: float | None = None  # over the last report interval (100: one core)
    memory_bytes: int | None = None
    methods: dict[str, MethodStatus] = dataclasses.field(default_factory=dict)
    # Member name -> broadcasts of this node's group calls that failed there (group.py).
    broadcast_errors: dict[str, int] = dataclasses.field(default_factory=dict)
    failures: list[Failure] = dataclasses.field(default_factory=list)
    sampled_at: float | None = None  # unix time of its last sample


@dataclasses.dataclass
class ProgramStatus:
    """A running program, as its controller sees it now."""

    program: str
    launch_type: str
    run_id: str
    started_at: float  # unix time of the launch
    state: str  # 'pending', 'running', 'stopping' or 'stopped'
    stop_reason: str
    failure: str  # the failure that stopped it ('' if none)
    nodes: list[NodeStatus]
    log_dir: str | None = None
    pending: str = ""  # what it waits for while 'pending' (a Slurm job's reason)
    changes: list[Change] = dataclasses.field(default_factory=list)  # oldest first


@dataclasses.dataclass
class Change:
    """A change of the running program: a group scaled, a new version applied."""

    at: float  # unix time
    what: str  # 'group 'actor': 2 -> 4 nodes (added actor/2, actor/3)'


def check_sample(sample: object) -> NodeSample:
    """`sample`, if it is a NodeSample of plain numbers in range and a histogram of the right
    length per method, which is what the controller's status reads of it.

    Raises:
      TypeError: naming what is not (a report of it is refused, rather than breaking every
        status after it).
    """
    if not isinstance(sample, NodeSample):
        raise TypeError(f"report expects a telemetry.NodeSample, got {type(sample).__name__}")
    _check(sample.cpu_secs is None or _number(sample.cpu_secs), "cpu_secs", sample.cpu_secs)
    _check(sample.memory_bytes is None or _count(sample.memory_bytes), "memory_bytes",
           sample.memory_bytes)
    _check(_number(sample.taken_at), "taken_at", sample.taken_at)
    _check(isinstance(sample.methods, dict), "methods", sample.methods)
    for name, counts in sample.methods.items():
        _check(isinstance(name, str) and _method_counts(counts), "methods", (name, counts))
    _check(isinstance(sample.broadcast_errors, dict), "broadcast_errors",
           sample.broadcast_errors)
    for member, count in sample.broadcast_errors.items():
        _check(isinstance(member, str) and _count(count), "broadcast_errors", (member, count))
    return sample


def _method_counts(counts: object) -> bool:
    return (isinstance(counts, MethodCounts) and _count(counts.calls)
            and _count(counts.errors) and _number(counts.total_secs)
            and latency_histogram.is_valid(counts.buckets, _BOUND))


def _check(good: bool, field: str, value: object) -> None:
    if not good:
        raise TypeError(f"a NodeSample's {field} is not what a sample holds: {value!r:.200}")


def _number(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and -_BOUND < value < _BOUND)


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _BOUND


def sample_process(methods: dict[str, MethodCounts]) -> NodeSample:
    """This process's CPU time (user + system, its threads') and resident memory, with
    `methods`."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return NodeSample(cpu_secs=usage.ru_utime + usage.ru_stime,
                      memory_bytes=_resident_bytes(), methods=methods)


def _resident_bytes() -> int | None:
    """The process's resident set now (/proc; None where there is no /proc)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def method_status(now: MethodCounts, before: MethodCounts | None,
                  interval_secs: float) -> MethodStatus:
    """A method's status from its counters now and at the previous sample."""
    recent = now.minus(before) if before is not None else None
    rate = recent.calls / interval_secs if recent is not None and interval_secs > 0 else 0.0
    return MethodStatus(calls=now.calls, errors=now.errors, calls_per_sec=rate,
                        p50_secs=now.percentile(0.5), p90_secs=now.percentile(0.9),
                        p99_secs=now.percentile(0.99), counts=now)
