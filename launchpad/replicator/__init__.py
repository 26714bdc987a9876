"""TF-Replicator's programming model on `tf.distribute` (imports TensorFlow).

    from launchpad import replicator
    repl = replicator.Replicator(devices=2)          # one argument picks where it runs
    with repl.scope():
        model = ...
    inputs = iter(repl.distribute_dataset(input_fn))
    loss = repl.reduce(repl.run(step_fn, inputs), "mean")

Inside `step_fn`: `all_reduce`, `all_gather`, `broadcast`, `replica_id`, `num_replicas`.
`Replicator(mesh={"batch": 2, "model": 2}, layouts=...)` splits the weights themselves over a
mesh of devices (mesh.py), trained with `replicator.optimizers` (SGD, Adam);
`Replicator(devices=N, devices_per_replica=K)` makes replicas of K devices each, placed by hand
with `logical_device(i)` (logical_devices.py).
`lp.ReplicatedNode` runs such a trainer as worker (and parameter-server) nodes of a program.
"""

from launchpad.replicator import optimizers
from launchpad.replicator.cluster import ASYNC, SYNC, Cluster
from launchpad.replicator.collectives import (
    all_gather,
    all_reduce,
    broadcast,
    num_replicas,
    replica_id,
)
from launchpad.replicator.devices import use_logical_cpus
from launchpad.replicator.replicator import (
    ASYNC_PARAMETER_SERVERS,
    LOCAL_DEVICES,
    MESH,
    ONE_DEVICE,
    SYNC_WORKERS,
    DistributedInput,
    InputIterator,
    Replicator,
    serve_task,
)

__all__ = [
    "Replicator", "Cluster", "DistributedInput", "InputIterator", "serve_task",
    "all_reduce", "all_gather", "broadcast", "replica_id", "num_replicas",
    "SYNC", "ASYNC", "ONE_DEVICE", "LOCAL_DEVICES", "SYNC_WORKERS", "ASYNC_PARAMETER_SERVERS",
    "MESH", "optimizers", "use_logical_cpus",
]
