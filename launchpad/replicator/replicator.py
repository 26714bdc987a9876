"""`Replicator`: TF-Replicator's programming model on `tf.distribute`.

The same model code runs on one device, on many devices of one machine, on many synchronous
workers, or asynchronously with parameter servers; which one is the constructor's arguments::

    replicator = Replicator(devices=2)                  # or a Cluster: many workers
    with replicator.scope():
        model, optimizer = make_model(), make_optimizer()
    inputs = iter(replicator.distribute_dataset(input_fn))

    def step_fn(batch):                                 # runs once per replica
        ...                                             # all_reduce(...) etc. work here
        return loss

    loss = replicator.reduce(replicator.run(step_fn, inputs), "mean")

Behind it: OneDeviceStrategy, MirroredStrategy (many local devices: GPUs, or logical CPU
devices where there are none), MultiWorkerMirroredStrategy (a sync Cluster) or
ParameterServerStrategy with a ClusterCoordinator (an async Cluster, on its chief); or, with
`mesh=`, DTensor: one replica whose weights are split over a mesh of devices (mesh.py). `run`
compiles the step with `tf.function` once per step function; called inside a `tf.function`
of the user's, it adds the step to that graph instead.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from launchpad.replicator import devices as devices_lib
from launchpad.replicator import mesh as mesh_mode
from launchpad.replicator.cluster import ASYNC, Cluster
from launchpad.replicator.collectives import reduce_op
from launchpad.replicator.logical_devices import LogicalDevices

ONE_DEVICE = "one_device"
LOCAL_DEVICES = "local_devices"
SYNC_WORKERS = "sync_workers"
ASYNC_PARAMETER_SERVERS = "async_parameter_servers"
MESH = "mesh"


class InputIterator:
    """An iterator of `Replicator.distribute_dataset`'s input: pass it to `run`, which takes
    the next per-replica batch from it inside the compiled step (on the worker the step runs
    on, in asynchronous training)."""

    def __init__(self, iterator: Any):
        self.iterator = iterator

    def __iter__(self) -> InputIterator:
        return self

    def __next__(self) -> Any:
        return next(self.iterator)


class DistributedInput:
    """A dataset split across the replicas; `iter()` gives an InputIterator."""

    def __init__(self, dataset: Any):
        self.dataset = dataset

    def __iter__(self) -> InputIterator:
        return InputIterator(iter(self.dataset))


def _mirrored(devices: list[str]) -> tf.distribute.MirroredStrategy:
    """MirroredStrategy over `devices`. Over CPU devices it reduces on one device: its default,
    collective ops, numbers its collectives per strategy, so two strategies in one process
    (two replicators, or a replicator and a test's reference) mix up each other's
    collectives ("Shape mismatch in the collective instance")."""
    on_cpus = all("CPU" in tf.DeviceSpec.from_string(d).device_type.upper() for d in devices)
    return tf.distribute.MirroredStrategy(
        devices, cross_device_ops=tf.distribute.ReductionToOneDevice() if on_cpus else None)


def _create_bounded(create: Callable[[], Any], timeout_secs: float, what: str) -> Any:
    """`create()` in a thread, waited for at most `timeout_secs`: creating a multi-worker
    strategy blocks until every task of the cluster answers, forever if one never does."""
    result: concurrent.futures.Future = concurrent.futures.Future()

    def attempt():
        try:
            result.set_result(create())
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            result.set_exception(e)

    threading.Thread(target=attempt, name="lp-replicator-start", daemon=True).start()
    try:
        return result.result(timeout=timeout_secs)
    except concurrent.futures.TimeoutError:
        raise TimeoutError(f"{what} did not come up within {timeout_secs:g} s: a task of the "
                           "cluster is not running (it failed, or is still starting)") from None


class Replicator:
    """Runs a step function once per replica and combines the results.

    Args:
      devices: the devices of this process to replicate over: None (every GPU, else the
        CPU), a count (GPUs, or logical CPU devices where there are none) or device names.
      cluster: the TensorFlow cluster for multi-worker training (see `Cluster`); None trains
        in this process alone. A sync cluster replicates over every worker (each uses its
        GPUs, else its CPU); an async one makes this process (the chief) the coordinator that
        schedules steps on the workers, with variables on the parameter servers.
      startup_timeout_secs: how long creating a multi-worker strategy may wait for the other
        tasks of the cluster.
      mesh: mesh mode (see mesh.py): mesh axis name -> size, e.g. {"batch": 2, "model": 2},
        over that many GPUs (logical CPU devices where there are not enough); the step runs
        once, on the whole model and the whole batch, as on one device.
      layouts: in mesh mode, which variables are split along which mesh axes: a variable name
        pattern (a regular expression) -> one mesh axis or None per dimension.
      devices_per_replica: TF-Replicator's logical devices (logical_devices.py): each replica
        spans this many of `devices` (a count), its parts placed by `logical_device(i)` in
        the step and `logical_device_for_variables(i)` in `scope()`.
    """

    def __init__(self, devices: int | Sequence[str] | None = None,
                 cluster: Cluster | None = None, startup_timeout_secs: float = 120.0,
                 mesh: dict[str, int] | None = None,
                 layouts: dict[str, Sequence[str | None]] | None = None,
                 devices_per_replica: int = 1):
        self._coordinator = None
        self._placement: mesh_mode.MeshPlacement | None = None
        self._logical: LogicalDevices | None = None
        self.cluster = cluster
        if devices_per_replica != 1:
            self._logical = devices_lib.logical_groups(devices, devices_per_replica, cluster, mesh)
            self.kind = LOCAL_DEVICES
            self.strategy = _mirrored([group[0] for group in self._logical.groups])
        elif mesh is not None or layouts is not None:
            self.kind = MESH
            self._placement = devices_lib.mesh_placement(mesh, layouts, devices, cluster)
            self.strategy = tf.distribute.get_strategy()  # (the default: one replica)
        elif cluster is None:
            names = devices_lib.local_devices(devices)
            self.kind = ONE_DEVICE if len(names) == 1 else LOCAL_DEVICES
            self.strategy = (tf.distribute.OneDeviceStrategy(names[0]) if len(names) == 1
                             else _mirrored(names))
        elif not cluster.is_chief and cluster.mode == ASYNC:
            raise ValueError(f"Task {cluster.task_type}:{cluster.task_index} of an async "
                             "cluster runs no replicator (only the chief does): use serve_task")
        else:
            if devices not in (None, 1) and not tf.config.list_physical_devices("GPU"):
                raise ValueError("Multi-worker replicas on CPU use one device per worker; "
                                 f"devices={devices!r} needs GPUs")
            if cluster.mode == ASYNC:
                self.kind = ASYNC_PARAMETER_SERVERS
                self.strategy = _create_bounded(
                    lambda: tf.distribute.experimental.ParameterServerStrategy(
                        cluster.resolver()), startup_timeout_secs, "The parameter servers")
                self._coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(
                    self.strategy)
            else:
                self.kind = SYNC_WORKERS
                self.strategy = _create_bounded(
                    lambda: tf.distribute.MultiWorkerMirroredStrategy(
                        cluster_resolver=cluster.resolver()),
                    startup_timeout_secs, "The synchronous workers' collective group")
        self._step_functions: dict[tuple, Callable] = {}

    @property
    def num_replicas(self) -> int:
        """Replicas per step: devices over all synchronous workers (1 per async step; 1 in
        mesh mode, whose one replica spans the mesh: its step sees the whole batch)."""
        return 1 if self._coordinator is not None else self.strategy.num_replicas_in_sync

    @property
    def mesh_shape(self) -> dict[str, int] | None:
        """The mesh's axes and sizes in mesh mode, else None."""
        return None if self._placement is None else dict(self._placement.shape)

    def shard(self, value: tf.Tensor, axes: Sequence[str | None]) -> tf.Tensor:
        """`value` (an activation, in the step) split along mesh `axes` (one axis or None per
        dimension) in mesh mode; `value` itself in any other mode, so the step stays the
        same on one device."""
        return value if self._placement is None else self._placement.reshard(value, axes)

    @staticmethod
    def layout_of(variable: Any) -> tuple[str | None, ...] | None:
        """The mesh axis each dimension of `variable` is split along (None: not split); None
        for a variable outside mesh mode."""
        return mesh_mode.layout_of(variable)

    @property
    def is_chief(self) -> bool:
        """Whether this process is the one that should save, log and serve results."""
        return self.cluster is None or self.cluster.is_chief

    def logical_device(self, index: int):
        """In the step: ops made in this context run on this replica's logical device
        `index` (of `devices_per_replica`); inputs arrive on its device 0."""
        if self._logical is None:
            raise ValueError("logical_device() needs Replicator(devices_per_replica=...)")
        return self._logical.ops_on(index)

    def logical_device_for_variables(self, index: int):
        """In `scope()`: variables made in this context live on every replica's logical
        device `index`."""
        if self._logical is None:
            raise ValueError("logical_device_for_variables() needs "
                             "Replicator(devices_per_replica=...)")
        return self._logical.variables_on(index)

    def scope(self):
        """Build the model, its variables and the optimizer inside this context (in mesh
        mode: each variable made already split over the mesh)."""
        if self._placement is not None:
            return self._placement.creating_variables()
        return self.strategy.scope()

    def distribute_dataset(self, input_fn: Callable[[tf.distribute.InputContext], Any]
                           ) -> DistributedInput:
        """The input, split across replicas: `input_fn(input_context)` returns this input
        pipeline's `tf.data.Dataset`, batched per replica
        (`input_context.get_per_replica_batch_size(global_batch)`) and sharded by
        `input_context.input_pipeline_id` if the pipelines must see different data."""
        if self._coordinator is not None:
            return DistributedInput(self._coordinator.create_per_worker_dataset(
                lambda: self.strategy.distribute_datasets_from_function(input_fn)))
        if self._placement is not None:  # one pipeline of the global batch, split at each step
            return DistributedInput(input_fn(tf.distribute.InputContext()))
        return DistributedInput(self.strategy.distribute_datasets_from_function(input_fn))

    def run(self, step_fn: Callable[..., Any], *args, **kwargs) -> Any:
        """Runs `step_fn(*args, **kwargs)` once per replica; InputIterator arguments are
        replaced by their next per-replica batch. Returns the per-replica results (sync), or
        a `RemoteValue` of the scheduled step (async: the step runs on some worker while this
        returns at once; `reduce` or `join` waits for it)."""
        if self._placement is not None:
            return self._run_on_mesh(step_fn, args, kwargs)
        is_input = tuple(isinstance(arg, InputIterator) for arg in args)
        raw = tuple(arg.iterator if taken else arg for arg, taken in zip(args, is_input,
                                                                         strict=True))

        def replicated(*raw_args, **raw_kwargs):
            inputs = tuple(next(arg) if taken else arg
                           for arg, taken in zip(raw_args, is_input, strict=True))
            return self.strategy.run(step_fn, args=inputs, kwargs=raw_kwargs)

        if tf.inside_function():  # the caller's own tf.function: become part of it
            return replicated(*raw, **kwargs)
        key = (step_fn, is_input)
        compiled = self._step_functions.get(key)
        if compiled is None:
            compiled = self._step_functions[key] = tf.function(replicated)
        if self._coordinator is not None:
            return self._coordinator.schedule(compiled, args=raw, kwargs=kwargs)
        return compiled(*raw, **kwargs)

    def _run_on_mesh(self, step_fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """Mesh mode's run: the next global batch of each input, split along the mesh's
        "batch" axis, then the step, compiled once, on every device of the mesh."""
        if tf.inside_function():
            raise RuntimeError("In mesh mode, call Replicator.run from Python, not inside a "
                               "tf.function of yours: it compiles the step itself, once")
        unmatched = self._placement.unmatched_patterns()
        if unmatched:
            raise ValueError(f"layouts {unmatched} matched no variable made in scope(): "
                             "patterns are searched in names such as 'dense_1/kernel'")
        inputs = tuple(self._placement.split_batch(next(arg)) if isinstance(arg, InputIterator)
                       else arg for arg in args)
        compiled = self._step_functions.get((step_fn,))
        if compiled is None:
            compiled = self._step_functions[(step_fn,)] = tf.function(step_fn)
        return compiled(*inputs, **kwargs)

    def reduce(self, values: Any, op: str = "mean", axis: int | None = None) -> Any:
        """Combines per-replica `values` (from `run`) into one: "sum" or "mean" over replicas
        (and over `axis` of each, if given). An async step's RemoteValue is waited for. In
        mesh mode there is one replica: its values, whole, as on one device."""
        op_value = reduce_op(op)
        if self._placement is not None:
            gathered = self._placement.gathered(values)
            if axis is None:
                return gathered
            reducer = tf.reduce_sum if op == "sum" else tf.reduce_mean
            return tf.nest.map_structure(lambda v: reducer(v, axis=axis), gathered)
        if self._coordinator is not None:
            fetched = values.fetch() if hasattr(values, "fetch") else values
            if axis is None:
                return tf.nest.map_structure(tf.convert_to_tensor, fetched)
            reducer = tf.reduce_sum if op == "sum" else tf.reduce_mean
            return tf.nest.map_structure(lambda v: reducer(v, axis=axis), fetched)
        return self.strategy.reduce(op_value, values, axis=axis)

    def join(self) -> None:
        """Waits for every scheduled step (async); sync steps are done when `run` returns."""
        if self._coordinator is not None:
            self._coordinator.join()

    def __repr__(self) -> str:
        if self._placement is not None:
            return f"<Replicator mesh {self._placement.shape}>"
        return f"<Replicator {self.kind}, {self.num_replicas} replica(s) per step>"


def serve_task(cluster: Cluster) -> tf.distribute.Server:
    """Starts the TensorFlow server of a worker or parameter-server task of an async cluster
    (it serves the chief until the process ends)."""
    if cluster.mode != ASYNC or cluster.is_chief:
        raise ValueError(f"serve_task is for the workers and ps of an async cluster, not "
                         f"{cluster.task_type}:{cluster.task_index} of a {cluster.mode} one")
    return tf.distribute.Server(cluster.cluster_spec(), job_name=cluster.task_type,
                                task_index=cluster.task_index, protocol="grpc", start=True)
