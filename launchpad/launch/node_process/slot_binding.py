"""A node's share of its host's CPUs and GPUs, bound where it starts.

The launcher knows where on its host each node goes (slurm/placement.py: its slot), not
which CPUs and GPUs the host's step gets. So it gives each node the offsets of its share -
LAUNCHPAD_CPU_SLOTS=4-6, LAUNCHPAD_GPU_SLOTS=1 - and the runner binds them at its start: the
Nth CPU its process may use (the step's affinity) and the Nth GPU the step sees
(CUDA_VISIBLE_DEVICES, which Slurm sets for a step with GPUs). Where the step sees fewer
than the offsets need (a cluster without an affinity plugin, on a machine with fewer CPUs
than the host claims), nothing is bound: the node shares what the step has.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping, Sequence

CPU_ENV = "LAUNCHPAD_CPU_SLOTS"
GPU_ENV = "LAUNCHPAD_GPU_SLOTS"


def slots_env(first_cpu: int, cpus: int, first_gpu: int, gpus: int) -> dict[str, str]:
    """The variables that give a node CPUs first_cpu.. and GPUs first_gpu.. of its host."""
    env = {CPU_ENV: f"{first_cpu}-{first_cpu + cpus - 1}"}
    if gpus:
        env[GPU_ENV] = f"{first_gpu}-{first_gpu + gpus - 1}"
    return env


def chosen(slots: str, available: Sequence) -> list | None:
    """Entries `slots` ('A-B') of `available`, or None if it has fewer."""
    first, last = (int(n) for n in slots.split("-"))
    return list(available[first:last + 1]) if last < len(available) else None


def bind(environ: MutableMapping[str, str] = os.environ) -> None:
    """Binds this process to its share (and takes the variables: its children do not)."""
    cpus, gpus = environ.pop(CPU_ENV, ""), environ.pop(GPU_ENV, "")
    if cpus:
        picked = chosen(cpus, sorted(os.sched_getaffinity(0)))
        if picked:
            os.sched_setaffinity(0, picked)
    if gpus:
        visible = [v for v in environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v]
        picked = chosen(gpus, visible)
        if picked:
            environ["CUDA_VISIBLE_DEVICES"] = ",".join(picked)
