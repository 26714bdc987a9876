"""Where a program's nodes go in its Slurm job, computed before anything is submitted.

    nodes (group, lp.Resources) + the cluster's hosts (inventory.py)
        -> Placement: components, each H hosts of one shape; every node on a host slot
        -> the sbatch request (`Placement.sbatch_argv`), shown by --lp_dry_run

Slurm gives every component of a heterogeneous job nodes of its own, so a component per
distinct lp.Resources (3 workers of 3 CPUs and a collector of 1 in two components) needs more
hosts than the program: on 3 hosts of 4 CPUs it pends for ever. Here groups share one
component unless they differ in kind - GPUs or not, or an `extra` Slurm must see per component
(partition, constraint, ...) - and the nodes of a component are packed onto as few hosts as
hold them, largest first, each on the least loaded host with room (so 3 + 1, 3, 3 there). The
component then asks for H hosts of the shape of its fullest one (`--nodes=H
--ntasks-per-node=1 --cpus-per-task=C`), and each node's step runs on its slot's host
(`srun -w HOST --exact`). `lp.SlurmSettings(components="by_resources")` keeps a component per
distinct lp.Resources for those who want Slurm to see them apart.

A layout no packing fits on the partition's usable hosts is refused with the arithmetic.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import shlex
from collections.abc import Iterable, Sequence
from typing import Any

from launchpad.launch.runtime.resources import Resources
from launchpad.launch.slurm.errors import SlurmError
from launchpad.launch.slurm.inventory import Host, Inventory, summary

BY_KIND = "by_kind"
BY_RESOURCES = "by_resources"
COMPONENT_MODES = (BY_KIND, BY_RESOURCES)


@dataclasses.dataclass(frozen=True)
class Slot:
    """Where one node runs: host `host` (0-based) of component `component`."""

    node: str  # 'label/index'
    group: str
    needs: Resources
    component: int
    host: int
    spare: bool = False  # room a group may grow into (SlurmSettings.max_nodes), no node yet


@dataclasses.dataclass(frozen=True)
class Component:
    """`hosts` hosts, each asked for the same share: what its fullest host's nodes need."""

    hosts: int
    cpus: int
    gpus: int
    memory_mb: int | None
    extra: tuple[tuple[str, Any], ...]
    groups: tuple[str, ...]

    def sbatch_options(self) -> list[str]:
        options = [f"--nodes={self.hosts}", "--ntasks-per-node=1",
                   f"--cpus-per-task={self.cpus}"]
        if self.gpus:
            options.append(f"--gpus-per-node={self.gpus}")
        if self.memory_mb is not None:
            options.append(f"--mem={self.memory_mb}M")
        return options + [f"--{key}={value}" for key, value in self.extra]


@dataclasses.dataclass(frozen=True)
class Placement:
    """The program's job, as data: its components and where each node runs."""

    program: str
    partition: str | None
    components: tuple[Component, ...]
    slots: tuple[Slot, ...]

    def slot_of(self, node: str) -> Slot:
        return self._by_node[node]

    @functools.cached_property
    def _by_node(self) -> dict[str, Slot]:
        return {slot.node: slot for slot in self.slots}

    @property
    def heterogeneous(self) -> bool:
        return len(self.components) > 1

    def sbatch_argv(self, job_wide: Sequence[str], each_component: Sequence[str],
                    batch_step: Sequence[str]) -> list[str]:
        """`sbatch --parsable ...` of this job, its batch step running `batch_step`:
        `job_wide` options once, `each_component`'s (partition, account, time, ...) for
        every component (Slurm reads them per component), a component's own after them."""
        argv = ["sbatch", "--parsable", *job_wide]
        for g, component in enumerate(self.components):
            argv += [":"] if g else []
            argv += [*each_component, *component.sbatch_options()]
        return argv + ["--wrap", shlex.join(["exec", *batch_step])]

    def describe(self, sbatch: Sequence[str] = ()) -> str:
        """The dry run's text: every host slot and its nodes, then the sbatch request."""
        where = f"partition {self.partition!r}" if self.partition else "the default partition"
        lines = [f"Program {self.program!r} as one Slurm job on {where}"
                 f"{' (heterogeneous)' if self.heterogeneous else ''}:"]
        for g, component in enumerate(self.components):
            lines.append(f"  component {g}: {component.hosts} host"
                         f"{'s' * (component.hosts != 1)} of {_shape(component)} "
                         f"(groups {', '.join(component.groups)})")
            for h in range(component.hosts):
                here = [s for s in self.slots if (s.component, s.host) == (g, h)]
                used = sum(s.needs.cpus for s in here)
                nodes = ", ".join(f"{s.node} ({_amount(s.needs.cpus, 'CPU')}"
                                  f"{', room to grow' if s.spare else ''})" for s in here)
                lines.append(f"    host {h} ({used}/{component.cpus} CPUs): {nodes}")
        if sbatch:
            lines.append("  " + shlex.join(sbatch))
        return "\n".join(lines)


def _amount(count: int, unit: str) -> str:
    return f"{count} {unit}{'s' * (count != 1)}"


def _needs(needs: Resources) -> str:
    return _amount(needs.cpus, "CPU") + (f" and {_amount(needs.gpus, 'GPU')}"
                                         if needs.gpus else "")


def _shape(component: Component) -> str:
    parts = [_amount(component.cpus, "CPU")]
    if component.gpus:
        parts.append(_amount(component.gpus, "GPU"))
    if component.memory_mb is not None:
        parts.append(f"{component.memory_mb} MiB")
    return ", ".join(parts)


def _kind(needs: Resources, mode: str) -> Any:
    if mode == BY_RESOURCES:
        return needs
    return (needs.gpus > 0, tuple(sorted(needs.extra.items())))


def _candidates(hosts: Iterable[Host], needs: Resources) -> list[Host]:
    """The hosts a component of nodes like `needs` may use, the largest first."""
    constraint = str(needs.extra.get("constraint", ""))
    usable = [h for h in hosts if (h.gpus > 0 or not needs.gpus)
              and (not constraint.isidentifier() or constraint in h.features)]
    if needs.gpus:
        return sorted(usable, key=lambda h: (h.gpus, h.cpus, h.memory_mb), reverse=True)
    return sorted(usable, key=lambda h: (h.cpus, h.memory_mb), reverse=True)


def _pack(nodes: list[tuple[str, str, Resources]],
          hosts: list[Host]) -> tuple[list[int], list[list[int]]] | None:
    """The fewest hosts of `hosts` (largest first) that hold `nodes`: each node's host index
    and each host's load [cpus, gpus, memory]; None if even all of them cannot."""
    order = sorted(range(len(nodes)), key=lambda i: (-nodes[i][2].cpus, -nodes[i][2].gpus,
                                                     -(nodes[i][2].memory_mb or 0)))
    total = sum(n[2].cpus for n in nodes)
    for count in range(1, len(hosts) + 1):
        top = hosts[:count]
        room = [min(h.cpus for h in top), min(h.gpus for h in top),
                min(h.memory_mb for h in top)]
        if total > room[0] * count:
            continue
        loads = [[0, 0, 0] for _ in range(count)]
        where = [0] * len(nodes)
        for i in order:
            need = [nodes[i][2].cpus, nodes[i][2].gpus, nodes[i][2].memory_mb or 0]
            fitting = [h for h in range(count)
                       if all(loads[h][d] + need[d] <= room[d] for d in range(3))]
            if not fitting:
                break
            host = min(fitting, key=lambda h: (loads[h][0], loads[h][1], h))
            where[i] = host
            loads[host] = [loads[host][d] + need[d] for d in range(3)]
        else:
            return where, loads
    return None


def place(program: str, nodes: Sequence[tuple[str, str, Resources]], inventory: Inventory,
          partition: str | None, mode: str = BY_KIND, spare: frozenset[str] = frozenset()
          ) -> Placement:
    """Places `nodes` ('label/index', group, Resources), in the program's order; those named
    in `spare` are room for a group to grow into, not nodes.

    Raises:
      SlurmError: no packing fits the partition's usable hosts; the message has the numbers.
    """
    if mode not in COMPONENT_MODES:
        raise ValueError(f"SlurmSettings.components must be one of {COMPONENT_MODES}, got "
                         f"{mode!r}")
    kinds: dict[Any, list[tuple[str, str, Resources]]] = {}
    for node in nodes:
        kinds.setdefault(_kind(node[2], mode), []).append(node)
    taken: set[str] = set()  # a heterogeneous job's components never share a host
    components, slots = [], []
    for g, members in enumerate(kinds.values()):
        first = members[0][2]
        where_to = first.extra.get("partition", partition)
        known = inventory.partitions
        if where_to is not None and known and where_to not in known:
            raise SlurmError(f"Program {program!r} asks for partition {where_to!r}, which "
                             f"Slurm does not have; its partitions: {', '.join(sorted(known))}")
        hosts = [h for h in _candidates(inventory.in_partition(where_to), first)
                 if h.name not in taken]
        packed = _pack(members, hosts)
        if packed is None:
            raise SlurmError(_refusal(program, members, hosts, where_to or
                                      inventory.default_partition, len(taken)))
        where, loads = packed
        chosen = hosts[:len(loads)]
        taken |= {h.name for h in chosen}
        with_memory = any(n[2].memory_mb is not None for n in members)
        components.append(Component(
            len(loads), max(load[0] for load in loads), max(load[1] for load in loads),
            max(load[2] for load in loads) if with_memory else None,
            tuple(sorted(first.extra.items())),
            tuple(dict.fromkeys(n[1] for n in members))))
        slots += [Slot(name, group, needs, g, host, name in spare)
                  for (name, group, needs), host in zip(members, where, strict=True)]
    order = {node[0]: i for i, node in enumerate(nodes)}
    return Placement(program, partition or inventory.default_partition, tuple(components),
                     tuple(sorted(slots, key=lambda s: order[s.node])))


def _refusal(program: str, members: list[tuple[str, str, Resources]], hosts: list[Host],
             partition: str | None, hosts_taken: int) -> str:
    """Why `members` fit no packing on `hosts`, with the numbers."""
    where = f"partition {partition!r}" if partition else "the default partition"
    groups: dict[str, tuple[Resources, int]] = {}
    for _, group, needs in members:
        groups[group] = (needs, groups.get(group, (needs, 0))[1] + 1)
    others = (f" ({hosts_taken} of its hosts go to the job's other components, which "
              "Slurm never puts on a host of this one)" if hosts_taken else "")
    if not hosts:
        first = members[0][2]
        kind = "".join([" with GPUs" if first.gpus else "",
                        f" with feature {first.extra['constraint']!r}"
                        if "constraint" in first.extra else ""])
        return (f"Group {members[0][1]!r} of program {program!r} cannot run on {where}: it "
                f"has no usable host{kind}{others}")
    for group, (needs, _) in groups.items():
        for name, asked, offered in (("CPUs", needs.cpus, max(h.cpus for h in hosts)),
                                     ("GPUs", needs.gpus, max(h.gpus for h in hosts)),
                                     ("MiB", needs.memory_mb or 0,
                                      max(h.memory_mb for h in hosts))):
            if asked > offered:
                return (f"Group {group!r} of program {program!r} asks for {asked} {name} "
                        f"per node, and the largest host of {where} has {offered}{others}")
    asked = " and ".join(f"group {group!r} needs {count} node{'s' * (count != 1)} of "
                         f"{_needs(needs)} ({_amount(needs.cpus * count, 'CPU')})"
                         for group, (needs, count) in groups.items())
    total = sum(needs.cpus * count for needs, count in groups.values())
    offered = sum(h.cpus for h in hosts)
    verdict = (f"{total} CPUs, on {offered}" if total > offered else
               f"{total} CPUs, which fit {offered} in sum but not whole nodes per host")
    hint = math.ceil(total / max(h.cpus for h in hosts))
    return (f"Program {program!r} does not fit {where}, which has "
            f"{summary(hosts)}{others}: {asked}: {verdict}. Ask for fewer or smaller nodes, "
            f"or a partition of at least {hint} such hosts")
