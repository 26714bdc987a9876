"""`lp.Resources`: what one node of a group needs, in one vocabulary for every cluster engine.

    lp.launch(program, launch_type="slurm",
              resources={"learner": lp.Resources(cpus=4, gpus=1, memory_mb=16000),
                         "actor": lp.Resources(cpus=1)})

Each engine maps it to its own terms (Slurm: `--cpus-per-task`, `--gpus-per-task`,
`--mem-per-cpu`; Ray's `num_cpus`/`num_gpus`/`memory`; Kubernetes' requests). Groups
without an entry get `Resources()`: one CPU per node. Local launch types check the group names
and ignore the rest, so one launch script serves every launch type.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class Resources:
    """What each node of a group needs.

    Args:
      cpus: CPU cores per node (>= 1).
      gpus: GPUs per node.
      memory_mb: memory per node in MiB; None: the engine's default.
      extra: engine-specific requests, e.g. {"constraint": "a100"} for Slurm (each becomes
        `--KEY=VALUE`) or custom resources for Ray.
    """

    cpus: int = 1
    gpus: int = 0
    memory_mb: int | None = None
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        for name, least in (("cpus", 1), ("gpus", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"Resources.{name} must be an int >= {least}, got {value!r}")
        if self.memory_mb is not None and (not isinstance(self.memory_mb, int)
                                           or self.memory_mb < 1):
            raise ValueError(f"Resources.memory_mb must be a positive int (MiB) or None, "
                             f"got {self.memory_mb!r}")
        if not isinstance(self.extra, Mapping):
            raise TypeError(f"Resources.extra must be a dict, got {self.extra!r}")

    def __hash__(self) -> int:
        return hash((self.cpus, self.gpus, self.memory_mb, tuple(sorted(self.extra.items()))))


def per_group(program_groups: list[str], program_name: str,
              resources: Mapping[str, Resources] | None) -> dict[str, Resources]:
    """Every group of the program -> its Resources (default: one CPU per node).

    Raises:
      ValueError: `resources` names a group the program does not have.
      TypeError: an entry is not an lp.Resources.
    """
    given = dict(resources or {})
    unknown = sorted(set(given) - set(program_groups))
    if unknown:
        raise ValueError(f"resources names groups {unknown} that program {program_name!r} "
                         f"does not have; its groups: {sorted(program_groups)}")
    for group, entry in given.items():
        if not isinstance(entry, Resources):
            raise TypeError(f"resources[{group!r}] must be an lp.Resources, got {entry!r}")
    return {group: given.get(group, Resources()) for group in program_groups}
