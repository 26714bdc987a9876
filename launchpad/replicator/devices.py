"""Which devices a Replicator replicates over: this machine's (its GPUs, else logical CPU
devices split from its CPU), groups of them (a replica spanning several: logical_devices.py),
or a mesh over this process's devices or every sync worker's (mesh.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from launchpad.replicator import mesh as mesh_mode
from launchpad.replicator.cluster import ASYNC, Cluster
from launchpad.replicator.logical_devices import LogicalDevices


def use_logical_cpus(count: int) -> list[str]:
    """Splits the CPU into `count` logical devices (for running replicas without GPUs) and
    returns their names. Must happen before TensorFlow initialises its devices in this
    process, unless it already has that many."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)])
    except RuntimeError:  # devices are initialised already: fine if there are enough
        pass
    names = [device.name for device in tf.config.list_logical_devices("CPU")]
    if len(names) < count:
        raise RuntimeError(
            f"{count} CPU replicas need {count} logical CPU devices, but TensorFlow in this "
            f"process was initialised with {len(names)}: create the Replicator before running "
            "any TensorFlow operation")
    return names[:count]


def local_devices(devices: int | Sequence[str] | None) -> list[str]:
    """The device names `devices` means on this machine: None is every GPU (else the CPU), an
    int that many GPUs (logical CPU devices where there are no GPUs), a list itself."""
    # Physical devices: listing logical ones would initialise TensorFlow's devices, after
    # which the CPU can no longer be split into logical devices.
    gpus = [f"/gpu:{i}" for i in range(len(tf.config.list_physical_devices("GPU")))]
    if devices is None:
        return gpus or ["/cpu:0"]
    if isinstance(devices, int) and not isinstance(devices, bool):
        if devices < 1:
            raise ValueError(f"devices must be at least 1, got {devices}")
        if not gpus:
            return ["/cpu:0"] if devices == 1 else use_logical_cpus(devices)
        if devices > len(gpus):
            raise ValueError(f"devices={devices}, but this machine has {len(gpus)} GPU(s)")
        return gpus[:devices]
    if isinstance(devices, Sequence) and not isinstance(devices, str) and devices and all(
            isinstance(d, str) for d in devices):
        return list(devices)
    raise TypeError(f"devices must be None, an int or a list of device names, got {devices!r}")


def logical_groups(devices: Any, per_replica: Any, cluster: Cluster | None,
                     mesh: Any) -> LogicalDevices:
    """The replicas' devices when each spans `per_replica` of this process's `devices`."""
    if isinstance(per_replica, bool) or not isinstance(per_replica, int) or per_replica < 1:
        raise ValueError(f"devices_per_replica must be an int >= 1, got {per_replica!r}")
    if cluster is not None or mesh is not None:
        raise ValueError("devices_per_replica is for the devices of one process: neither "
                         "cluster= nor mesh= (a mesh splits the weights by itself)")
    if isinstance(devices, bool) or not isinstance(devices, int) or devices % per_replica:
        raise ValueError(f"devices_per_replica={per_replica} needs devices= a count it "
                         f"divides, got devices={devices!r}")
    names = local_devices(devices)
    return LogicalDevices([names[r:r + per_replica]
                           for r in range(0, len(names), per_replica)])


def mesh_placement(mesh: Any, layouts: Any, devices: Any,
                    cluster: Cluster | None) -> mesh_mode.MeshPlacement:
    """Mesh mode's placement: over this process's devices, or, with a sync cluster, over
    every worker's (each holding an equal part of the mesh)."""
    if mesh is None or devices is not None:
        raise ValueError("Mesh mode takes mesh= (and layouts=), not devices=: the mesh's "
                         "size says how many devices")
    shape = mesh_mode.checked_shape(mesh)
    size = 1
    for axis_size in shape.values():
        size *= axis_size
    if cluster is None:
        return mesh_mode.MeshPlacement(shape, local_devices(size), layouts)
    workers = list(cluster.jobs["worker"])
    if cluster.mode == ASYNC or size % len(workers):
        raise ValueError(f"A mesh across workers needs a sync cluster whose {len(workers)} "
                         f"workers divide its {size} devices equally; mesh={shape}")
    device_type = mesh_mode.join_clients(workers, cluster.task_index, size // len(workers))
    return mesh_mode.MeshPlacement(shape, None, layouts, device_type)
