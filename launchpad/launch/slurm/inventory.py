"""What the Slurm cluster's hosts offer, as `sinfo` says: the facts placement packs against.

    sinfo -h -N -o "%N|%c|%m|%G|%P|%t|%f"   ->   one Host per node, with its partitions

Only hosts that can take new work count: a host that is down, drained, draining or failed
(its state in sinfo's short form) is left out, so a program that fits only on them is refused
with the numbers of those that can. A host counts its CPUs, memory and GPUs as configured, not
as free now: what other jobs hold is Slurm's to wait for, and is reported while the job pends.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable

SINFO_ARGV = ["sinfo", "-h", "-N", "-o", "%N|%c|%m|%G|%P|%t|%f"]
# sinfo's short states of hosts that take no new job (a suffix such as '*' or '~' aside).
_UNUSABLE = {"down", "drain", "drng", "drained", "fail", "failg", "maint", "inval", "futr",
             "unk", "npc", "pow_dn", "powered_down", "reboot^"}
_GPUS = re.compile(r"(?:^|,)gpu(?::[^:,()]+)?:(\d+)")


@dataclasses.dataclass(frozen=True)
class Host:
    """One Slurm node: what it offers jobs, and where it belongs."""

    name: str
    cpus: int
    memory_mb: int
    gpus: int
    partitions: frozenset[str]
    features: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True)
class Inventory:
    """The usable hosts of the cluster, and the partition a job without one goes to."""

    hosts: tuple[Host, ...]
    default_partition: str | None
    partitions: frozenset[str]

    def in_partition(self, partition: str | None) -> list[Host]:
        """The usable hosts of `partition` (None: the default partition)."""
        name = partition or self.default_partition
        return [host for host in self.hosts if name in host.partitions]


def parse(sinfo_output: str) -> Inventory:
    """The inventory of `sinfo` run with SINFO_ARGV (a node appears once per partition)."""
    by_name: dict[str, Host] = {}
    default = None
    partitions: set[str] = set()
    for line in sinfo_output.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 7:
            continue
        name, cpus, memory, gres, partition, state, features = fields
        if partition.endswith("*"):
            partition = partition[:-1]
            default = partition
        partitions.add(partition)
        if state.rstrip("*~#!%$@^-+") in _UNUSABLE or not cpus.isdigit():
            continue
        known = by_name.get(name)
        if known is not None:
            by_name[name] = dataclasses.replace(known,
                                                partitions=known.partitions | {partition})
            continue
        by_name[name] = Host(
            name, int(cpus), int(memory) if memory.isdigit() else 0,
            sum(int(n) for n in _GPUS.findall(gres)), frozenset({partition}),
            frozenset(f for f in features.split(",") if f and f != "(null)"))
    return Inventory(tuple(by_name.values()), default, frozenset(partitions))


def read(run: Callable[[list[str]], str]) -> Inventory:
    """The cluster's inventory, `run` giving a command's output (slurm/submission.py's runner)."""
    return parse(run(SINFO_ARGV))


def summary(hosts: Iterable[Host]) -> str:
    """'3 hosts of 4 CPUs', '2 hosts of 16 CPUs and 4 GPUs and 1 of 8 CPUs'."""
    shapes: dict[tuple[int, int], int] = {}
    for host in hosts:
        shapes[(host.cpus, host.gpus)] = shapes.get((host.cpus, host.gpus), 0) + 1
    if not shapes:
        return "no usable hosts"
    parts = []
    for i, ((cpus, gpus), count) in enumerate(sorted(shapes.items(), reverse=True)):
        what = f"{cpus} CPU{'s' * (cpus != 1)}" + (f" and {gpus} GPU{'s' * (gpus != 1)}"
                                                   if gpus else "")
        noun = "host" + "s" * (count != 1) if i == 0 else ""
        parts.append(f"{count} {noun} of {what}".replace("  ", " "))
    return " and ".join(parts)
