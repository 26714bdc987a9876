"""Mesh mode: one model whose weights are split over a mesh of devices (model parallelism), as
one replica whose batch may be split too (data parallelism), on TensorFlow's DTensor.

    repl = Replicator(mesh={"batch": 2, "model": 2},
                      layouts={r"hidden/kernel": (None, "model"), r"out/kernel": ("model", None)})

The step function sees the whole model and the whole global batch, as on one device; DTensor
runs it on every device of the mesh, each with its slices. Which variables are split, and along
which axis of the mesh, is said by name: `layouts` maps a regular expression, searched in a
variable's full name (its name scopes and name: "dense_1/kernel"), to one mesh axis or None per
dimension of the variable. The first pattern that matches decides; a variable that none matches
is replicated (whole on every device). Inputs are split along the mesh axis named "batch" (if
the mesh has one), replicated along the others.

A variable's initial value is computed once in host memory and split there: each device is
sent its slice only, so no device ever holds a split variable whole. On CPU-only machines the
devices are logical devices of the CPU, as for `devices=N`.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import tensorflow as tf
from tensorflow.experimental import dtensor

BATCH_AXIS = "batch"

AxisSpec = Sequence[str | None]


class MeshPlacement:
    """Where mesh mode puts every variable, input and result (see the module doc).

    Args:
      shape: mesh axis name -> its size, e.g. {"batch": 2, "model": 2}.
      devices: the mesh's devices, as many as the sizes' product, in row-major order.
      layouts: variable name pattern -> one mesh axis (or None) per dimension.
    """

    def __init__(self, shape: Mapping[str, int], devices: Sequence[str] | None,
                 layouts: Mapping[str, AxisSpec] | None, device_type: str = "CPU"):
        self.shape = dict(shape)
        self.mesh = (dtensor.create_mesh(list(self.shape.items()), devices=list(devices))
                     if devices is not None else  # the mesh of every client (join_clients)
                     dtensor.create_distributed_mesh(list(self.shape.items()),
                                                     device_type=device_type))
        self._rules = [(pattern, re.compile(pattern), tuple(axes))
                       for pattern, axes in _checked_layouts(layouts, self.shape).items()]
        self._matched: set[str] = set()

    # --- variables ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def creating_variables(self) -> Iterator[None]:
        """Every `tf.Variable` made in this context (a Keras layer's, an optimizer's) is
        made split over the mesh as `layouts` says."""
        with tf.variable_creator_scope(self._create):
            yield

    def _create(self, next_creator: Any, **kwargs: Any) -> dtensor.DVariable:
        del next_creator  # a DVariable is made instead
        keras_optimizer = _keras_optimizer_making_it()
        if keras_optimizer is not None:
            raise TypeError(
                f"Keras' {keras_optimizer} is wrong on weights split over a mesh (its updates "
                "of DTensor variables are silently wrong, and it makes its slots whole): use "
                "launchpad.replicator.optimizers.SGD or .Adam, built inside "
                "Replicator.scope()")
        name = kwargs.get("name") or "Variable"
        full_name = "/".join(filter(None, [tf.get_current_name_scope(), name]))
        initial = kwargs["initial_value"]
        with tf.device("/cpu:0"):  # the host's memory: split there, sent by slice
            value = tf.convert_to_tensor(initial() if callable(initial) else initial,
                                         dtype=kwargs.get("dtype"))
        layout = self._layout_for(full_name, value.shape)
        return dtensor.DVariable(self.split(value, layout), name=name,
                                 trainable=kwargs.get("trainable", True))

    def _layout_for(self, name: str, shape: tf.TensorShape) -> dtensor.Layout:
        """The layout of variable `name` of `shape`: its rule's, checked against the shape."""
        for pattern, compiled, axes in self._rules:
            if compiled.search(name):
                self._matched.add(pattern)
                if len(axes) != shape.rank:
                    raise ValueError(
                        f"layouts[{pattern!r}] gives {len(axes)} axes to variable {name!r}, "
                        f"which has {shape.rank} dimensions (shape {shape.as_list()})")
                for dimension, axis in enumerate(axes):
                    if axis is not None and shape[dimension] % self.shape[axis]:
                        raise ValueError(
                            f"Variable {name!r}: its dimension {dimension} ({shape[dimension]}) "
                            f"cannot be split in {self.shape[axis]} along mesh axis {axis!r} "
                            f"(layouts[{pattern!r}]): it is not divisible")
                return self.layout(axes)
        return dtensor.Layout.replicated(self.mesh, rank=shape.rank)

    def unmatched_patterns(self) -> list[str]:
        """The layouts' patterns that no variable made so far matched (a misspelt name)."""
        return [pattern for pattern, _, _ in self._rules if pattern not in self._matched]

    def layout(self, axes: AxisSpec) -> dtensor.Layout:
        """The layout splitting dimension i along mesh axis `axes[i]` (None: not split)."""
        return dtensor.Layout([dtensor.UNSHARDED if a is None else a for a in axes], self.mesh)

    def split(self, value: tf.Tensor, layout: dtensor.Layout) -> tf.Tensor:
        """`value` (in this process's memory) as a DTensor of `layout`: each device is sent
        its own slice."""
        pieces = []
        for device_id in self.mesh.local_device_ids():
            location = self.mesh.device_location(device_id)
            index = []
            for dimension, axis in enumerate(layout.sharding_specs):
                if axis == dtensor.UNSHARDED:
                    index.append(slice(None))
                    continue
                size = value.shape[dimension] // self.shape[axis]
                start = location[self.mesh.dim_names.index(axis)] * size
                index.append(slice(start, start + size))
            pieces.append(value[tuple(index)])
        return dtensor.pack(pieces, layout)

    # --- inputs and results ------------------------------------------------------------------

    def split_batch(self, batch: Any) -> Any:
        """A global batch, split along the mesh's "batch" axis (replicated without one)."""
        def place(tensor: Any) -> Any:
            tensor = tf.convert_to_tensor(tensor)
            rank = tensor.shape.rank
            if BATCH_AXIS in self.shape and rank:
                if tensor.shape[0] % self.shape[BATCH_AXIS]:
                    raise ValueError(
                        f"A batch of {tensor.shape[0]} cannot be split over the mesh's "
                        f"{self.shape[BATCH_AXIS]} 'batch' devices: make the global batch a "
                        "multiple of it")
                return self.split(tensor, self.layout([BATCH_AXIS] + [None] * (rank - 1)))
            return self.split(tensor, dtensor.Layout.replicated(self.mesh, rank=rank))
        return tf.nest.map_structure(place, batch)

    def gathered(self, value: Any) -> Any:
        """A result of the step as an ordinary tensor of this process (whole)."""
        def whole(tensor: Any) -> Any:
            if not isinstance(tensor, tf.Tensor) or not dtensor.is_dtensor(tensor):
                return tensor
            rank = tensor.shape.rank
            replicated = dtensor.relayout(tensor, dtensor.Layout.replicated(self.mesh, rank))
            return tf.identity(dtensor.unpack(replicated)[0])
        return tf.nest.map_structure(whole, value)

    def reshard(self, value: tf.Tensor, axes: AxisSpec) -> tf.Tensor:
        """`value` (in the step) split along `axes` of the mesh instead: an activation's
        layout, where the weights' do not decide it well."""
        return dtensor.relayout(value, self.layout(_checked_axes(axes, self.shape, "shard")))


# Every worker of a mesh seeds TensorFlow, Keras, numpy and Python with this, so that their
# initial values and their input pipelines' order agree (each computes them, and keeps its
# devices' slices).
CLIENTS_SEED = 20181016


def join_clients(workers: Sequence[str], index: int, local_devices: int) -> str:
    """Makes this process client `index` of a mesh over the processes at `workers` (their
    'host:port', this one's included), with `local_devices` devices of its own: GPUs, else
    logical devices of the CPU. DTensor's multi-client mode, whose settings are environment
    variables of this process, read as its accelerator system starts: before anything else
    initialises TensorFlow here. Returns the device type."""
    gpus = len(tf.config.list_physical_devices("GPU"))
    if gpus and gpus < local_devices:
        raise ValueError(f"Each worker of this mesh holds {local_devices} devices; this one "
                         f"has {gpus} GPU(s)")
    if not gpus:
        tf.config.set_logical_device_configuration(
            tf.config.list_physical_devices("CPU")[0],
            [tf.config.LogicalDeviceConfiguration() for _ in range(local_devices)])
    os.environ.update({"DTENSOR_CLIENT_ID": str(index),
                       "DTENSOR_NUM_CLIENTS": str(len(workers)),
                       "DTENSOR_JOB_NAME": "worker", "DTENSOR_JOBS": ",".join(workers)})
    device_type = "GPU" if gpus else "CPU"
    dtensor.initialize_accelerator_system(device_type)
    tf.keras.utils.set_random_seed(CLIENTS_SEED)
    return device_type


def _keras_optimizer_making_it() -> str | None:
    """The class of the Keras optimizer whose code is making a variable now, if one is."""
    frame = sys._getframe(2)  # noqa: SLF001 - the callers of the variable creator
    for _ in range(64):
        if frame is None:
            return None
        owner = frame.f_locals.get("self")
        if owner is not None and any(
                cls.__module__.startswith(("keras", "tf_keras")) and "Optimizer" in cls.__name__
                for cls in type(owner).__mro__):
            return type(owner).__name__
        frame = frame.f_back
    return None


def layout_of(variable: Any) -> tuple[str | None, ...] | None:
    """The mesh axis each dimension of `variable` is split along (None: not split); None for
    a variable of no mesh (any other mode)."""
    inner = variable
    if not isinstance(variable, tf.Variable):
        try:  # a Keras variable: the tf.Variable behind it
            inner = variable.value
        except AttributeError:
            return None
    if not isinstance(inner, dtensor.DVariable):
        return None
    specs = dtensor.fetch_layout(inner).sharding_specs
    return tuple(None if spec == dtensor.UNSHARDED else spec for spec in specs)


def checked_shape(mesh: Any) -> dict[str, int]:
    """`mesh` as {axis name: size}, each a positive int."""
    if not isinstance(mesh, Mapping) or not mesh:
        raise TypeError(f"mesh must be a dict of axis name -> size, e.g. "
                        f"{{'batch': 2, 'model': 2}}; got {mesh!r}")
    for axis, size in mesh.items():
        if not isinstance(axis, str) or not axis:
            raise TypeError(f"mesh axis names must be strings, got {axis!r}")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"mesh axis {axis!r} must have a positive int size, got {size!r}")
    return dict(mesh)


def _checked_layouts(layouts: Mapping[str, AxisSpec] | None,
                     shape: Mapping[str, int]) -> dict[str, tuple[str | None, ...]]:
    if layouts is None:
        return {}
    if not isinstance(layouts, Mapping):
        raise TypeError(f"layouts must be a dict of name pattern -> axes, got {layouts!r}")
    checked = {}
    for pattern, axes in layouts.items():
        try:
            re.compile(pattern)
        except (re.error, TypeError) as e:
            raise ValueError(f"layouts: {pattern!r} is no regular expression ({e})") from None
        checked[pattern] = _checked_axes(axes, shape, f"layouts[{pattern!r}]")
    return checked


def _checked_axes(axes: Any, shape: Mapping[str, int], what: str) -> tuple[str | None, ...]:
    if isinstance(axes, str) or not isinstance(axes, Sequence):
        raise TypeError(f"{what} must be a tuple of mesh axes (or None) per dimension, "
                        f"got {axes!r}")
    unknown = [axis for axis in axes if axis is not None and axis not in shape]
    if unknown:
        raise ValueError(f"{what} names mesh axes {unknown} that the mesh lacks; its axes: "
                         f"{list(shape)}")
    named = [axis for axis in axes if axis is not None]
    if len(named) != len(set(named)):
        raise ValueError(f"{what} splits two dimensions along one mesh axis: {tuple(axes)}")
    return tuple(axes)
