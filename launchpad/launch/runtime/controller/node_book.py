"""The controller's book of what each unit of a running program is doing, for its status.

The supervisor writes the transitions it decides (started, restarting, finished, failed,
ended by the stop) and each node's runner its samples (the protocol's `report`); `status()`
reads them joined with the addresses the registry holds (telemetry.py says what the states
mean). A report from a run that is not the unit's current one is dropped, so a lost run that
comes back does not overwrite its successor.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from launchpad import telemetry
from launchpad.launch.runtime.controller.registry import NodeKey


@dataclasses.dataclass
class _Unit:
    kind: str
    state: str = "starting"
    instance: str = ""
    host: str = ""
    pid: int = 0
    started_at: float | None = None
    restarts: int = 0
    failures: list[telemetry.Failure] = dataclasses.field(default_factory=list)
    sample: telemetry.NodeSample | None = None
    previous: telemetry.NodeSample | None = None  # the sample before, for rates


def kinds_of(program: Any) -> dict[NodeKey, str]:
    """Every unit of `program` -> its type, as the status names it (a colocation with how
    many nodes it holds)."""
    return {(node.label, node.index): kind_of(node) for node in program.get_all_nodes()}


def kind_of(node: Any) -> str:
    """A unit's type, as the status names it (a colocation with how many nodes it holds)."""
    inner = len(node.all_nodes()) - 1
    return f"{type(node).__name__}({inner})" if inner > 0 else type(node).__name__


class NodeBook:
    """See the module doc; thread-safe.

    Args:
      kinds: every unit -> its node type's name (`kinds_of`).
    """

    def __init__(self, kinds: dict[NodeKey, str]):
        self._lock = threading.Lock()
        self._units = {unit: _Unit(kind) for unit, kind in kinds.items()}

    def add(self, unit: NodeKey, kind: str) -> None:
        """A group grew by `unit`, of node type `kind`."""
        with self._lock:
            self._units[unit] = _Unit(kind)

    def remove(self, unit: NodeKey) -> None:
        """A group shrank: `unit` leaves the status."""
        with self._lock:
            self._units.pop(unit, None)

    def started(self, unit: NodeKey, instance: str, host: str, pid: int) -> None:
        with self._lock:
            entry = self._units[unit]
            entry.state, entry.instance, entry.host, entry.pid = "running", instance, host, pid
            entry.started_at = time.time()
            entry.sample = entry.previous = None

    def failed(self, unit: NodeKey, reason: str, node_traceback: str, restarted: bool) -> None:
        with self._lock:
            entry = self._units[unit]
            entry.failures.append(telemetry.Failure(reason, node_traceback, time.time(),
                                                    restarted))
            entry.state = "restarting" if restarted else "failed"
            entry.restarts += restarted
            entry.instance = ""

    def finished(self, unit: NodeKey) -> None:
        with self._lock:
            entry = self._units[unit]
            if entry.state != "failed":
                entry.state = "stopped"
            entry.instance = ""

    def all_ended(self) -> None:
        """The stop sequence has ended every unit: those not failed are stopped."""
        with self._lock:
            for entry in self._units.values():
                if entry.state != "failed":
                    entry.state = "stopped"
                entry.instance = ""

    def state(self, unit: NodeKey) -> str:
        """The unit's state now (one of telemetry.STATES)."""
        with self._lock:
            return self._units[unit].state

    def report(self, unit: NodeKey, instance: str, sample: telemetry.NodeSample) -> None:
        """A node's sample; dropped unless `instance` is the unit's current run.

        Raises:
          TypeError: it is not a NodeSample the status can read (telemetry.check_sample).
        """
        telemetry.check_sample(sample)
        with self._lock:
            entry = self._units[unit]
            if entry.instance != instance:
                return
            entry.previous, entry.sample = entry.sample, sample

    def statuses(self, addresses: dict[NodeKey, dict[str, str]]) -> list[telemetry.NodeStatus]:
        """Every unit now, in the program's order; `addresses`: each unit's registered
        addresses (name -> host:port)."""
        now = time.time()
        with self._lock:
            return [_status(unit, entry, addresses.get(unit, {}), now)
                    for unit, entry in self._units.items()]


def _status(unit: NodeKey, entry: _Unit, addresses: dict[str, str],
            now: float) -> telemetry.NodeStatus:
    status = telemetry.NodeStatus(
        name=f"{unit[0]}/{unit[1]}", label=unit[0], index=unit[1], kind=entry.kind,
        state=entry.state, host=entry.host, pid=entry.pid, addresses=dict(addresses),
        restarts=entry.restarts, failures=list(entry.failures))
    if entry.state == "running" and entry.started_at is not None:
        status.started_at = entry.started_at
        status.uptime_secs = now - entry.started_at
    sample, previous = entry.sample, entry.previous
    if sample is None:
        return status
    status.sampled_at = sample.taken_at
    status.cpu_secs, status.memory_bytes = sample.cpu_secs, sample.memory_bytes
    interval = sample.taken_at - previous.taken_at if previous is not None else 0.0
    if (previous is not None and interval > 0 and sample.cpu_secs is not None
            and previous.cpu_secs is not None):
        status.cpu_percent = 100.0 * (sample.cpu_secs - previous.cpu_secs) / interval
    status.broadcast_errors = dict(sample.broadcast_errors)
    before = previous.methods if previous is not None else {}
    status.methods = {
        name: telemetry.method_status(counts, before.get(name), interval)
        for name, counts in sorted(sample.methods.items())}
    return status
