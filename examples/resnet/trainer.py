"""The ResNet example's trainer: written once against `launchpad.replicator`, it runs
unchanged on one device, many devices, many sync workers or async parameter servers.

It lives in a module of its own (not in launch.py, which runs as `__main__`) so that worker
processes import it by name: TensorFlow's AutoGraph needs the step function's source file.
"""

from __future__ import annotations

import time

NUM_CLASSES = 10


def synthetic_input_fn(global_batch: int, image_size: int):
    """Batches made on the fly: image = pattern[label] + noise, one seed per input pipeline."""

    def input_fn(input_context):
        import tensorflow as tf
        per_replica = input_context.get_per_replica_batch_size(global_batch)
        patterns = tf.random.stateless_normal([NUM_CLASSES, image_size, image_size, 3],
                                              seed=[7, 7])

        def example(i):
            seed = tf.stack([tf.cast(input_context.input_pipeline_id, tf.int64), i])
            label = tf.random.stateless_uniform([], seed, maxval=NUM_CLASSES, dtype=tf.int32)
            noise = 0.3 * tf.random.stateless_normal([image_size, image_size, 3], seed + 1)
            return tf.gather(patterns, label) + noise, label

        return (tf.data.Dataset.range(2**62).map(example, num_parallel_calls=tf.data.AUTOTUNE)
                .batch(per_replica, drop_remainder=True).prefetch(2))

    return input_fn


class ResNetTrainer:
    """Trains ResNet-50 with SGD (momentum 0.9) on the synthetic images."""

    def __init__(self, replicator, global_batch: int = 32, image_size: int = 32,
                 width: int = 8, learning_rate: float = 0.03):
        import tensorflow as tf

        from examples.resnet.resnet import resnet50
        self._replicator = replicator
        self._global_batch = global_batch
        self.model = resnet50(image_size, NUM_CLASSES, width)
        self.optimizer = tf.keras.optimizers.SGD(learning_rate, momentum=0.9)
        self.optimizer.build(self.model.trainable_variables)  # its slots, in the scope
        self._inputs = iter(replicator.distribute_dataset(
            synthetic_input_fn(global_batch, image_size)))

    def _step_fn(self, batch):
        """One replica's part of a step: its loss is scaled by the global batch, so the
        replicas' gradients add up to the whole batch's."""
        import tensorflow as tf
        images, labels = batch
        with tf.GradientTape() as tape:
            logits = self.model(images, training=True)
            per_example = tf.keras.losses.sparse_categorical_crossentropy(
                labels, logits, from_logits=True)
            loss = tf.reduce_sum(per_example) / self._global_batch
        variables = self.model.trainable_variables
        self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables,
                                           strict=True))
        return loss

    def train(self, steps: int) -> dict:
        """`steps` training steps: each one's loss (the global batch's mean), and the steps
        per second they ran at. All steps are started before any loss is read, so async
        training keeps every worker busy."""
        started = time.perf_counter()
        results = [self._replicator.run(self._step_fn, self._inputs) for _ in range(steps)]
        losses = [float(self._replicator.reduce(result, "sum")) for result in results]
        return {"losses": losses, "steps_per_s": steps / (time.perf_counter() - started)}

    def describe(self) -> str:
        return (f"{self.model.name}, {self.model.count_params():,} parameters, "
                f"{self._replicator!r}")
