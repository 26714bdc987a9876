"""The room on a running Slurm job's hosts: which of each host's CPUs and GPUs its nodes hold.

    HostRoom(placement)        every placed node holds its slot's share of its host
    take(nodes)                a group grows: each new node gets the least loaded host of its
                               group's component with room (all of them, or none and a
                               SlurmError with the numbers and what would make room)
    free(names)                a group shrank: what those nodes held is free again
    move(name, avoid)          its host is lost: the node takes room on another host
    env(name)                  the node's share as offsets of its host's (slot_binding.py)

A job's hosts are what it asked Slurm for: a component's H hosts of C CPUs (placement.py), of
which its nodes use what they were packed into. A group grows into what is left: the holes
of the packing, and the spare slots `lp.SlurmSettings(max_nodes=...)` made the job ask for.
A node's CPUs are a run of consecutive offsets (slot_binding binds them), so a freed node's
run is found again by the next one that fits it.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence

from launchpad.launch.node_process import slot_binding
from launchpad.launch.runtime.resources import Resources
from launchpad.launch.slurm.errors import SlurmError
from launchpad.launch.slurm.placement import Placement

HostKey = tuple[int, int]  # (component, host)


@dataclasses.dataclass
class _Host:
    """One host's share of the job, and who holds which of it."""

    cpus: list[str | None]  # offset -> the node that holds it
    gpus: list[str | None]
    memory_mb: int | None  # what is left (None: the job asked for no memory)


@dataclasses.dataclass(frozen=True)
class _Held:
    host: HostKey
    first_cpu: int
    cpus: int
    first_gpu: int
    gpus: int
    memory_mb: int


class HostRoom:
    """See the module doc; thread-safe."""

    def __init__(self, placement: Placement, job_id: str = ""):
        self._placement = placement
        self._job = f"Slurm job {job_id}" if job_id else "its Slurm job"
        self._lock = threading.Lock()
        self._hosts = {(g, h): _Host([None] * c.cpus, [None] * c.gpus, c.memory_mb)
                       for g, c in enumerate(placement.components) for h in range(c.hosts)}
        self._held: dict[str, _Held] = {}
        for slot in placement.slots:
            if not slot.spare:
                self._hold(slot.node, (slot.component, slot.host), slot.needs)

    def host_of(self, name: str) -> HostKey:
        return self._held[name].host

    def env(self, name: str) -> dict[str, str]:
        """Node `name`'s share of its host, as the variables the runner binds."""
        held = self._held[name]
        return slot_binding.slots_env(held.first_cpu, held.cpus, held.first_gpu, held.gpus)

    def take(self, group: str, names: Sequence[str], needs: Resources) -> list[HostKey]:
        """Room for new nodes `names` of `group`, each needing `needs`: their hosts.

        Raises:
          SlurmError: the job's hosts cannot hold them all (none is taken then).
        """
        component = next((g for g, c in enumerate(self._placement.components)
                          if group in c.groups), 0)
        keys = [key for key in self._hosts if key[0] == component]
        with self._lock:
            taken = []
            for name in names:
                fitting = [key for key in keys if self._fits(key, needs)]
                if not fitting:
                    for done in taken:
                        self._release(done)
                    raise SlurmError(self._refusal(group, len(names), needs, keys))
                key = min(fitting, key=lambda k: (self._used(k), k))
                self._hold(name, key, needs)
                taken.append(name)
            return [self._held[name].host for name in names]

    def move(self, name: str, avoid: set[HostKey]) -> HostKey:
        """Node `name` has lost its host: it takes room on another host of its component,
        not one of `avoid` (hosts lost too); returns it.

        Raises:
          SlurmError: none has room (the node keeps its place, and the error its numbers).
        """
        with self._lock:
            held = self._held[name]
            needs = Resources(cpus=held.cpus, gpus=held.gpus, memory_mb=held.memory_mb or None)
            keys = [key for key in self._hosts if key[0] == held.host[0]
                    and key != held.host and key not in avoid]
            fitting = [key for key in keys if self._fits(key, needs)]
            if not fitting:
                raise SlurmError(
                    f"Node {name} lost its host (host {held.host[1]} of component "
                    f"{held.host[0]} of {self._job}), and no other host of the job has room "
                    f"for its {needs.cpus} CPUs ({self._free_text(keys) or 'no other host'}): "
                    "lp.SlurmSettings(max_nodes=...) makes the job hold room to spare")
            self._release(name)
            key = min(fitting, key=lambda k: (self._used(k), k))
            self._hold(name, key, needs)
            return key

    def free(self, names: Sequence[str]) -> None:
        """Nodes `names` are gone: what they held is free."""
        with self._lock:
            for name in names:
                if name in self._held:
                    self._release(name)

    def _used(self, key: HostKey) -> int:
        return sum(holder is not None for holder in self._hosts[key].cpus)

    def _fits(self, key: HostKey, needs: Resources) -> bool:
        host = self._hosts[key]
        return (_free_run(host.cpus, needs.cpus) is not None
                and _free_run(host.gpus, needs.gpus) is not None
                and (host.memory_mb is None or host.memory_mb >= (needs.memory_mb or 0)))

    def _hold(self, name: str, key: HostKey, needs: Resources) -> None:
        host = self._hosts[key]
        first_cpu, first_gpu = _free_run(host.cpus, needs.cpus), _free_run(host.gpus,
                                                                            needs.gpus)
        if first_cpu is None or first_gpu is None:
            raise SlurmError(f"Node {name} does not fit its slot (host {key[1]} of component "
                             f"{key[0]}) of {self._job}")
        host.cpus[first_cpu:first_cpu + needs.cpus] = [name] * needs.cpus
        host.gpus[first_gpu:first_gpu + needs.gpus] = [name] * needs.gpus
        memory = needs.memory_mb or 0
        if host.memory_mb is not None:
            host.memory_mb -= memory
        self._held[name] = _Held(key, first_cpu, needs.cpus, first_gpu, needs.gpus, memory)

    def _release(self, name: str) -> None:
        held = self._held.pop(name)
        host = self._hosts[held.host]
        for taken in (host.cpus, host.gpus):
            taken[:] = [None if holder == name else holder for holder in taken]
        if host.memory_mb is not None:
            host.memory_mb += held.memory_mb

    def _refusal(self, group: str, count: int, needs: Resources,
                 keys: list[HostKey]) -> str:
        free = self._free_text(keys)
        nodes = f"{count} node{'s' * (count != 1)}"
        gpus = f" and {needs.gpus} GPUs" if needs.gpus else ""
        size = self._size_of(group) + count
        return (f"Group {group!r} of program {self._placement.program!r} cannot grow by "
                f"{nodes} of {needs.cpus} CPUs{gpus} each: the hosts {self._job} has for it "
                f"({free}) have no room for them. Launch it with lp.SlurmSettings(max_nodes="
                f"{{{group!r}: {size}}}) (or more) so that its job asks Slurm for that room")

    def _free_text(self, keys: list[HostKey]) -> str:
        return ", ".join(f"host {h}: {self._hosts[(g, h)].cpus.count(None)} of "
                         f"{len(self._hosts[(g, h)].cpus)} CPUs free" for g, h in keys)

    def _size_of(self, group: str) -> int:
        return sum(name.rpartition("/")[0] == group for name in self._held)


def _free_run(taken: list[str | None], count: int) -> int | None:
    """The first offset of `count` consecutive free entries of `taken` (0 if count is 0)."""
    run = 0
    for offset, holder in enumerate(taken):
        run = run + 1 if holder is None else 0
        if run == count:
            return offset - count + 1
    return 0 if count == 0 else None
