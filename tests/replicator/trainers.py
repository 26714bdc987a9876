"""A small linear-regression trainer written once for every replicator mode: the tests run
this same code on one device, two devices, two sync workers and async parameter servers."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from launchpad import replicator as replicator_lib

FEATURES = 4
TRUE_WEIGHTS = np.arange(1, FEATURES + 1, dtype=np.float32)


def _example(i):
    """Example i: deterministic features and target (the same in every process)."""
    x = tf.sin(tf.cast(i, tf.float32) * tf.range(1, FEATURES + 1, dtype=tf.float32))
    return x, tf.reduce_sum(x * TRUE_WEIGHTS) + 0.5


def input_fn_for(global_batch: int):
    """Global batch b is examples [b * global_batch, (b + 1) * global_batch) in every mode:
    each input pipeline keeps its slice of it, split into per-replica batches."""

    def input_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        per_replica = input_context.get_per_replica_batch_size(global_batch)
        per_pipeline = global_batch // input_context.num_input_pipelines
        start = input_context.input_pipeline_id * per_pipeline
        return (tf.data.Dataset.range(10**9).batch(global_batch)
                .map(lambda b: b[start:start + per_pipeline]).unbatch()
                .map(_example).batch(per_replica))

    return input_fn


class LinearTrainer:
    """y = x.w + b by SGD with momentum; the loss of a step is the mean over its global batch.

    Only APIs that behave the same in Keras 2 (TF 2.15) and Keras 3 (TF 2.16+): the model's
    variables are plain tf.Variables (a Keras 3 variable is not one: its `device` is None),
    and the optimizer is built here, inside the replicator's scope, so its step counter and
    momentum slots exist, placed by the strategy, before the first step.
    """

    def __init__(self, replicator: replicator_lib.Replicator, global_batch: int = 8,
                 learning_rate: float = 0.1, momentum: float = 0.5, reporter=None,
                 steps: int | None = None):
        self._replicator = replicator
        self._global_batch = global_batch
        self._reporter = reporter
        self._steps = steps
        self.weights = tf.Variable(tf.zeros([FEATURES]), name="weights")
        self.bias = tf.Variable(0.0, name="bias")
        self._optimizer = tf.keras.optimizers.SGD(learning_rate, momentum=momentum)
        self._optimizer.build([self.weights, self.bias])
        self._inputs = iter(replicator.distribute_dataset(input_fn_for(global_batch)))

    def _step_fn(self, batch):
        x, y = batch
        with tf.GradientTape() as tape:
            error = tf.linalg.matvec(x, self.weights) + self.bias - y
            # Summed over this replica, divided by the global batch: the replicas' gradients
            # add up to the gradient of the global batch's mean loss.
            loss = tf.reduce_sum(error ** 2) / self._global_batch
        variables = [self.weights, self.bias]
        self._optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables,
                                            strict=True))
        return loss

    def step(self) -> float:
        """One training step; the global batch's mean loss before it."""
        return float(self._replicator.reduce(self._replicator.run(self._step_fn, self._inputs),
                                             "sum"))

    def get_variables(self) -> dict[str, np.ndarray]:
        """The model's variables, and the optimizer's step counter ("steps": how many
        updates it applied, wherever the replicator keeps it)."""
        return {"weights": self.weights.numpy(), "bias": self.bias.numpy(),
                "steps": np.asarray(self._optimizer.iterations.numpy())}

    def variable_devices(self) -> list[str]:
        return [self.weights.device, self.bias.device]

    def report(self, tag) -> None:
        """Puts (tag, this task's variables) into the reporter (every sync worker does)."""
        self._reporter.put((tag, self.get_variables()))


class RunningLinearTrainer(LinearTrainer):
    """The same trainer driving itself: `run()` steps until `steps` are done or the program
    stops; with `workers_ignore_stop`, only the chief stops, and the other workers are left
    waiting in the next step's all-reduce for a chief that never joins it."""

    def __init__(self, *args, workers_ignore_stop: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self._ignore_stop = workers_ignore_stop and not self._replicator.is_chief

    def run(self) -> None:
        import launchpad as lp
        done = 0
        while ((self._ignore_stop or not lp.stop_event().is_set())
               and (self._steps is None or done < self._steps)):
            self.step()
            done += 1
            if done == 1 and self._replicator.is_chief and self._reporter is not None:
                self._reporter.put(("stepping", None))
        if self._reporter is not None:
            self._reporter.put(("ran", done))


class WideTrainer:
    """y = sum(relu(x @ kernel)) + bias, the kernel split by columns on a mesh (`LAYOUTS`),
    trained by `replicator.optimizers.Adam`: the same code on one device and on a mesh."""

    LAYOUTS = {r"kernel": (None, "model")}

    def __init__(self, replicator: replicator_lib.Replicator, global_batch: int = 8):
        self._replicator = replicator
        self._global_batch = global_batch
        self.kernel = tf.Variable(tf.reshape(tf.range(FEATURES * 8, dtype=tf.float32),
                                             (FEATURES, 8)) / 40.0, name="kernel")
        self.bias = tf.Variable(0.0, name="bias")
        self._optimizer = replicator_lib.optimizers.Adam(0.05)
        self._optimizer.build([self.kernel, self.bias])
        self._inputs = iter(replicator.distribute_dataset(input_fn_for(global_batch)))

    def _step_fn(self, batch):
        x, y = batch
        with tf.GradientTape() as tape:
            predicted = tf.reduce_sum(tf.nn.relu(x @ self.kernel), axis=1) + self.bias
            loss = tf.reduce_mean(tf.square(predicted - y))
        variables = [self.kernel, self.bias]
        self._optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables,
                                            strict=True))
        return loss

    def step(self) -> float:
        """One training step; the global batch's mean loss before it."""
        return float(self._replicator.reduce(self._replicator.run(self._step_fn,
                                                                  self._inputs)))

    def get_variables(self) -> dict[str, np.ndarray]:
        """The variables, whole (gathered from the mesh's devices)."""
        return {"kernel": np.asarray(self._replicator.reduce(self.kernel.read_value())),
                "bias": np.asarray(self._replicator.reduce(self.bias.read_value()))}
