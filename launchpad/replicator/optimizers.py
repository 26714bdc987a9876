"""Optimizers that are right on weights split over a mesh (and on any other weights).

Each update is computed from values, never from a slot read back after it was assigned: in a
step compiled for a mesh, DTensor does not always order a variable's read after an assignment
to it in the same step (Adam's second moment was read stale, as zero, for some variables:
their first step moved them by m / epsilon).

Keras' optimizers are not: on DTensor variables a stock Keras `Adam` runs without an error and
moves the weights by about 3e4 instead of 0.2 (TF 2.15 and 2.21 alike), and its momentum's
slots are made whole. These keep each slot split like its variable and make the same updates
as Keras' own, to the last bit on one device:

    with repl.scope():
        model = make_model()
        optimizer = replicator.optimizers.Adam(1e-3)
        optimizer.build(model.trainable_variables)
    ...
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))   # in the step

They run on one device and in mesh mode; a step of many replicas (devices=N, workers) keeps
Keras' optimizers, which combine the replicas' gradients.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from typing import Any

import tensorflow as tf
from tensorflow.experimental import dtensor


def _tf_variable(variable: Any) -> tf.Variable:
    """The tf.Variable behind a Keras 3 variable (itself for a tf.Variable)."""
    return variable if isinstance(variable, tf.Variable) else variable.value


def _zeros_like(variable: tf.Variable, dtype: tf.DType | None = None) -> tf.Variable:
    """A slot of `variable`: zeros, split over the mesh as it is (if it is)."""
    dtype = dtype or variable.dtype
    if isinstance(variable, dtensor.DVariable):
        layout = dtensor.fetch_layout(variable)
        return dtensor.DVariable(dtensor.call_with_layout(
            tf.zeros, layout, shape=variable.shape, dtype=dtype), trainable=False)
    return tf.Variable(tf.zeros(variable.shape, dtype), trainable=False)


def _counter(like: tf.Variable) -> tf.Variable:
    """The step counter, on the mesh of `like` if it has one."""
    if isinstance(like, dtensor.DVariable):
        mesh = dtensor.fetch_layout(like).mesh
        return dtensor.DVariable(dtensor.call_with_layout(
            tf.zeros, dtensor.Layout.replicated(mesh, rank=0), shape=(), dtype=tf.int64),
            trainable=False)
    return tf.Variable(tf.constant(0, tf.int64), trainable=False)


class Optimizer(abc.ABC):
    """What every optimizer here shares: `build(variables)` makes its slots (call it inside
    `Replicator.scope()`), `apply_gradients(pairs)` updates the variables (in the step)."""

    slot_names: tuple[str, ...] = ()

    def __init__(self, learning_rate: float):
        if isinstance(learning_rate, bool) or not isinstance(learning_rate, (int, float)) \
                or learning_rate <= 0:
            raise ValueError(f"learning_rate must be a positive number, got {learning_rate!r}")
        self.learning_rate = float(learning_rate)
        self.iterations: tf.Variable | None = None
        self._slots: dict[int, dict[str, tf.Variable]] = {}

    def build(self, variables: Sequence[Any]) -> None:
        """Makes the slots of `variables` (split like each of them) and the step counter."""
        variables = [_tf_variable(v) for v in variables]
        if not variables:
            raise ValueError("build() needs the variables the optimizer will update")
        if self.iterations is None:
            self.iterations = _counter(variables[0])
        for variable in variables:
            if id(variable) not in self._slots:
                self._slots[id(variable)] = {name: _zeros_like(variable)
                                             for name in self.slot_names}

    def apply_gradients(self, pairs: Iterable[tuple[Any, Any]]) -> None:
        """Updates each variable by its gradient (pairs of gradient, variable)."""
        pairs = [(gradient, _tf_variable(variable)) for gradient, variable in pairs]
        unbuilt = [v.name for _, v in pairs if id(v) not in self._slots]
        if unbuilt or self.iterations is None:
            if tf.inside_function():
                raise RuntimeError(
                    f"{type(self).__name__} has no slots for {unbuilt}: call "
                    "optimizer.build(model.trainable_variables) inside Replicator.scope(), "
                    "before the first step")
            self.build([v for _, v in pairs])
        replica = tf.distribute.get_replica_context()
        if replica is not None and replica.num_replicas_in_sync > 1:
            raise RuntimeError(
                f"launchpad.replicator.optimizers.{type(self).__name__} runs on one device "
                "and in mesh mode; a step of several replicas (devices=N, workers) uses a "
                "Keras optimizer, which combines the replicas' gradients")
        step = tf.cast(self.iterations + 1, tf.float32)
        for gradient, variable in pairs:
            if gradient is not None:
                self._update(variable, tf.cast(gradient, variable.dtype), step,
                             self._slots[id(variable)])
        self.iterations.assign_add(1)

    @abc.abstractmethod
    def _update(self, variable: tf.Variable, gradient: tf.Tensor, step: tf.Tensor,
                slots: dict[str, tf.Variable]) -> None:
        """Updates one variable by its gradient at step `step` (1 at the first)."""


class SGD(Optimizer):
    """Stochastic gradient descent, with momentum if `momentum` > 0 (Keras' rule:
    `m = momentum * m - lr * g; w += m`)."""

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.0):
        super().__init__(learning_rate)
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {momentum!r}")
        self.momentum = float(momentum)
        self.slot_names = ("momentum",) if momentum else ()

    def _update(self, variable, gradient, step, slots):
        del step
        if not self.momentum:
            variable.assign_sub(self.learning_rate * gradient)
            return
        moved = self.momentum * slots["momentum"] - self.learning_rate * gradient
        slots["momentum"].assign(moved)
        variable.assign_add(moved)


class Adam(Optimizer):
    """Adam (Kingma and Ba), as Keras computes it: bias correction folded into the step size,
    `epsilon` added to the root of the second moment."""

    slot_names = ("m", "v")

    def __init__(self, learning_rate: float = 0.001, beta_1: float = 0.9,
                 beta_2: float = 0.999, epsilon: float = 1e-7):
        super().__init__(learning_rate)
        for name, value in (("beta_1", beta_1), ("beta_2", beta_2)):
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {value!r}")
        self.beta_1, self.beta_2, self.epsilon = float(beta_1), float(beta_2), float(epsilon)

    def _update(self, variable, gradient, step, slots):
        rate = (self.learning_rate * tf.sqrt(1 - tf.pow(self.beta_2, step))
                / (1 - tf.pow(self.beta_1, step)))
        m = slots["m"] + (gradient - slots["m"]) * (1 - self.beta_1)
        v = slots["v"] + (tf.square(gradient) - slots["v"]) * (1 - self.beta_2)
        slots["m"].assign(m)
        slots["v"].assign(v)
        variable.assign_sub(tf.cast(rate, variable.dtype) * m / (tf.sqrt(v) + self.epsilon))
