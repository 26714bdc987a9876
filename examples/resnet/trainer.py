"""The ResNet example's trainer: written once against `launchpad.replicator`, it runs
unchanged on one device, many devices, many sync workers or async parameter servers.

It lives in a module of its own (not in launch.py, which runs as `__main__`) so that worker
processes import it by name: TensorFlow's AutoGraph needs the step function's source file.
TensorFlow is imported when a trainer is made, so the launcher that imports this module does
not load it.
"""

from __future__ import annotations

import time


class ResNetTrainer:
    """Trains ResNet-50 with SGD (momentum 0.9) on the upsampled digits, tests it on their
    held-out split, and with a `checkpoint_dir` checkpoints every `checkpoint_every` steps
    and resumes from the latest checkpoint there when made.

    The step counter is a variable of its own, checkpointed with the model and the optimizer,
    and advanced by this process once the steps it ran are done. (The optimizer's
    `iterations` is no such counter: in async training Keras 3 loses increments when
    workers update it at once.)
    """

    def __init__(self, replicator, global_batch: int = 32, image_size: int = 32,
                 width: int = 8, learning_rate: float = 0.03, checkpoint_dir: str | None = None,
                 checkpoint_every: int = 100):
        import tensorflow as tf

        from examples.resnet import digits
        from examples.resnet.checkpoints import Checkpoints
        from examples.resnet.resnet import resnet50
        self._replicator = replicator
        self._global_batch = global_batch
        self._checkpoint_every = checkpoint_every
        split = digits.load_split()
        self.model = resnet50(image_size, digits.NUM_CLASSES, width)
        self.optimizer = tf.keras.optimizers.SGD(learning_rate, momentum=0.9)
        self.optimizer.build(self.model.trainable_variables)  # its slots, in the scope
        self._step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self._checkpoints = Checkpoints(
            replicator, checkpoint_dir, model=self.model, optimizer=self.optimizer,
            step=self._step) if checkpoint_dir else None
        if self._checkpoints:
            self._checkpoints.restore_latest()
        self._inputs = iter(replicator.distribute_dataset(
            digits.train_input_fn(split, global_batch, image_size)))
        self._test_images = digits.upsample(split.test_images, image_size)
        self._test_labels = tf.constant(split.test_labels)
        self._count_correct = tf.function(self._count_correct_fn)

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

    def _count_correct_fn(self, images, labels):
        import tensorflow as tf
        predicted = tf.argmax(self.model(images, training=False), axis=-1, output_type=tf.int32)
        return tf.reduce_sum(tf.cast(predicted == labels, tf.int32))

    def step(self) -> int:
        """Training steps taken so far, over every run resumed from a checkpoint."""
        return int(self._step.numpy())

    def train(self, steps: int) -> dict:
        """`steps` training steps, checkpointing at every multiple of `checkpoint_every`: each
        step's loss (the global batch's mean), the step counter after them and the steps per
        second they ran at (checkpoints included). The steps between two checkpoints are all
        started before any loss is read, so async training keeps every worker busy."""
        started = time.perf_counter()
        losses: list[float] = []
        while len(losses) < steps:
            chunk = steps - len(losses)
            if self._checkpoints:
                chunk = min(chunk, self._checkpoint_every - self.step() % self._checkpoint_every)
            results = [self._replicator.run(self._step_fn, self._inputs) for _ in range(chunk)]
            losses += [float(self._replicator.reduce(result, "sum")) for result in results]
            self._step.assign_add(chunk)
            if self._checkpoints and self.step() % self._checkpoint_every == 0:
                path = self._checkpoints.save(self.step())
                if path:
                    print(f"trainer: wrote checkpoint {path}", flush=True)
        return {"losses": losses, "step": self.step(),
                "steps_per_s": steps / (time.perf_counter() - started)}

    def evaluate(self) -> dict:
        """The model's accuracy on the held-out test images (inference mode: batch norm uses
        its moving statistics), computed by this process on its copy of the variables."""
        correct = int(self._count_correct(self._test_images, self._test_labels))
        count = int(self._test_labels.shape[0])
        return {"accuracy": correct / count, "images": count, "step": self.step()}

    def describe(self) -> str:
        return (f"{self.model.name}, {self.model.count_params():,} parameters, "
                f"{self._replicator!r}")
