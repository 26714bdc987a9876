"""The trainer: a classifier of the digits whose wide hidden layer is split Megatron-style over
a mesh - its weight by columns, the output layer's by rows, so the one all-reduce between them
is the output's - or kept whole on one device; the same code either way.

The split is said once, by name (`LAYOUTS`): `replicator.Replicator(mesh=..., layouts=...)`
makes each weight already split, and `replicator.optimizers.Adam` keeps its slots split the
same way. With `devices=1` the layouts are not used and everything else is unchanged.
"""

from __future__ import annotations

import time

import numpy as np
import tensorflow as tf

from examples.resnet.digits import NUM_CLASSES, load_split
from launchpad import replicator

# Column-split hidden layer (and its bias), row-split output layer: Megatron-LM's MLP.
LAYOUTS = {r"wide/kernel": (None, "model"), r"wide/bias": ("model",),
           r"logits/kernel": ("model", None)}


def parse_mesh(text: str) -> dict[str, int]:
    """'batch:2,model:2' -> {'batch': 2, 'model': 2}."""
    mesh = {}
    for part in text.split(","):
        axis, _, size = part.partition(":")
        if not axis or not size.isdigit() or int(size) < 1:
            raise ValueError(f"--mesh={text!r}: each part is AXIS:SIZE, e.g. batch:2,model:2")
        mesh[axis] = int(size)
    return mesh


class MegatronTrainer:
    """Trains the classifier; `train(steps)` and `evaluate()` are called through its handle.

    Args:
      mesh: 'batch:B,model:M' for mesh mode, '' for one device.
      hidden: the wide layer's width (a multiple of the mesh's model axis).
      global_batch: images per step (a multiple of the mesh's batch axis).
      learning_rate: Adam's.
    """

    def __init__(self, mesh: str = "", hidden: int = 1024, global_batch: int = 64,
                 learning_rate: float = 1e-3):
        self._replicator = (replicator.Replicator(mesh=parse_mesh(mesh), layouts=LAYOUTS)
                            if mesh else replicator.Replicator(devices=1))
        self._split = load_split()
        with self._replicator.scope():
            self._model = tf.keras.Sequential([
                tf.keras.layers.Dense(hidden, activation="relu", name="wide"),
                tf.keras.layers.Dense(NUM_CLASSES, name="logits")])
            self._model.build((None, 64))
            self._optimizer = replicator.optimizers.Adam(learning_rate)
            self._optimizer.build(self._model.trainable_variables)
        self._inputs = iter(self._replicator.distribute_dataset(
            self._input_fn(global_batch)))
        self._steps = 0

    def _input_fn(self, global_batch: int):
        def input_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
            images = self._split.train_images.reshape(-1, 64)
            examples = tf.data.Dataset.from_tensor_slices((images, self._split.train_labels))
            return (examples.shuffle(len(images), seed=0).repeat()
                    .batch(context.get_per_replica_batch_size(global_batch),
                           drop_remainder=True))
        return input_fn

    def _step_fn(self, batch):
        images, labels = batch
        with tf.GradientTape() as tape:
            logits = self._model(images)
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
                labels, logits, from_logits=True))
        variables = self._model.trainable_variables
        gradients = tape.gradient(loss, variables)
        self._optimizer.apply_gradients(zip(gradients, variables, strict=True))
        return loss

    def step(self) -> int:
        """The step counter."""
        return self._steps

    def train(self, steps: int) -> dict:
        """Runs `steps` steps; their losses, the step counter and the speed."""
        began = time.perf_counter()
        losses = [float(self._replicator.reduce(self._replicator.run(self._step_fn,
                                                                     self._inputs)))
                  for _ in range(steps)]
        self._steps += steps
        return {"step": self._steps, "losses": losses,
                "steps_per_s": steps / (time.perf_counter() - began)}

    def evaluate(self) -> dict:
        """The accuracy on the held-out digits (computed as training runs: on the mesh)."""
        images = self._split.test_images.reshape(-1, 64)
        mesh = self._replicator.mesh_shape or {}
        padding = -len(images) % mesh.get("batch", 1)  # a batch the mesh's batch axis splits
        padded = np.concatenate([images, np.zeros((padding, 64), np.float32)])
        inputs = iter(self._replicator.distribute_dataset(
            lambda _: tf.data.Dataset.from_tensors(padded)))
        logits = np.asarray(self._replicator.reduce(self._replicator.run(self._model, inputs)))
        predicted = np.argmax(logits[:len(images)], axis=1)
        accuracy = float(np.mean(predicted == self._split.test_labels))
        return {"accuracy": accuracy, "images": len(images), "step": self._steps}

    def describe(self) -> str:
        """What trains, where."""
        wide = self._model.layers[0].kernel
        return (f"{self._model.count_params():,} parameters, wide layer "
                f"{tuple(wide.shape)} split {self._replicator.layout_of(wide)}, "
                f"{self._replicator!r}")
