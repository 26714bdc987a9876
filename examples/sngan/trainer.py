"""The SN-GAN example's trainer: written once against `launchpad.replicator`, it runs
unchanged on one device, on many devices of one process, or on many synchronous workers.

It lives in a module of its own (not in launch.py, which runs as `__main__`) so that worker
processes import it by name: TensorFlow's AutoGraph needs the step function's source file.
TensorFlow is imported inside the methods, so a driver process that imports this module to
pickle the program does not load it.
"""

from __future__ import annotations

import time

import numpy as np

EVALUATION_SEED = 2024  # the noise every evaluation and grid uses, so they compare over steps


class SnganTrainer:
    """Trains the class-conditional GAN on the digits with the hinge loss: each step one
    discriminator update (Adam), then one generator update against the updated
    discriminator."""

    def __init__(self, replicator, global_batch: int = 64, noise_dim: int = 32,
                 hidden: int = 256, d_learning_rate: float = 4e-4,
                 g_learning_rate: float = 1e-4, beta_1: float = 0.5, seed: int = 0):
        import tensorflow as tf

        from examples.sngan import digits, model
        self._replicator = replicator
        self._global_batch = global_batch
        self._noise_dim = noise_dim
        self.generator = model.Generator(noise_dim, hidden, seed)
        self.discriminator = model.Discriminator(hidden, seed + 1)
        self._d_optimizer = tf.keras.optimizers.Adam(d_learning_rate, beta_1=beta_1)
        self._g_optimizer = tf.keras.optimizers.Adam(g_learning_rate, beta_1=beta_1)
        self._d_optimizer.build(self.discriminator.trainable_variables)  # slots in the scope
        self._g_optimizer.build(self.generator.trainable_variables)
        self._inputs = iter(replicator.distribute_dataset(
            digits.input_fn(global_batch, noise_dim, seed)))
        self._steps_done = 0
        self._scorer = None

    def _step_fn(self, batch):
        """One replica's part of a step; losses are sums over the global batch, so the
        replicas' gradients add up to the whole batch's. The discriminator scores the real and
        the fake images in one call, the one that runs the power iterations' step."""
        import tensorflow as tf

        from examples.sngan.model import discriminator_hinge_loss, generator_hinge_loss
        images, labels, noise, fake_labels = batch
        fakes = self.generator(noise, fake_labels)
        with tf.GradientTape() as tape:
            scores = self.discriminator(tf.concat([images, fakes], 0),
                                        tf.concat([labels, fake_labels], 0), update_u=True)
            real_scores, fake_scores = tf.split(scores, 2)
            d_loss = tf.reduce_sum(
                discriminator_hinge_loss(real_scores, fake_scores)) / self._global_batch
        self._descend(self._d_optimizer, tape, d_loss, self.discriminator)
        with tf.GradientTape() as tape:
            fake_scores = self.discriminator(self.generator(noise, fake_labels), fake_labels)
            g_loss = tf.reduce_sum(generator_hinge_loss(fake_scores)) / self._global_batch
        self._descend(self._g_optimizer, tape, g_loss, self.generator)
        return d_loss, g_loss

    @staticmethod
    def _descend(optimizer, tape, loss, network) -> None:
        """One optimizer step on `network`'s trainable variables down `loss`'s gradient."""
        variables = network.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))

    def train(self, steps: int) -> dict:
        """`steps` training steps: the discriminator's and the generator's mean loss over
        them, the steps done in all, and the steps per second these ran at."""
        started = time.perf_counter()
        results = [self._replicator.run(self._step_fn, self._inputs) for _ in range(steps)]
        losses = np.array([[float(self._replicator.reduce(loss, "sum")) for loss in result]
                           for result in results])
        self._steps_done += steps
        return {"d_loss": float(losses[:, 0].mean()), "g_loss": float(losses[:, 1].mean()),
                "steps_done": self._steps_done,
                "steps_per_s": steps / (time.perf_counter() - started)}

    def samples(self, per_class: int) -> np.ndarray:
        """`per_class` generated images of each class (classes x per_class x 8 x 8), always
        from the same noise."""
        import tensorflow as tf

        from examples.sngan.digits import IMAGE_SIZE, NUM_CLASSES
        labels = tf.repeat(tf.range(NUM_CLASSES), per_class)
        noise = tf.random.stateless_normal([NUM_CLASSES * per_class, self._noise_dim],
                                           [EVALUATION_SEED, 0])
        images = self.generator(noise, labels).numpy()
        return images.reshape(NUM_CLASSES, per_class, IMAGE_SIZE, IMAGE_SIZE)

    def evaluate(self, per_class: int = 100) -> dict:
        """The recognised fraction and the spread ratio (see evaluation.py) of `per_class`
        samples of each class, after the steps done so far."""
        from examples.sngan import digits
        from examples.sngan.evaluation import DigitScorer
        if self._scorer is None:
            self._scorer = DigitScorer(*digits.load_scaled())
        images = self.samples(per_class)
        intended = np.repeat(np.arange(digits.NUM_CLASSES), per_class)
        return {"recognised_fraction": self._scorer.recognised_fraction(images, intended),
                "spread_ratio": self._scorer.spread_ratio(images, intended),
                "steps_done": self._steps_done}

    def write_sample_grid(self, path: str, per_class: int = 10) -> str | None:
        """Writes a PNG of `per_class` samples per class (a row each) to `path` and returns
        it; only the chief writes (every sync worker runs this call), the others return
        None."""
        from examples.sngan.sample_grid import write_sample_grid
        if not self._replicator.is_chief:
            return None
        write_sample_grid(self.samples(per_class), path)
        return path

    def describe(self) -> str:
        parameters = sum(int(np.prod(v.shape)) for v in (
            *self.generator.trainable_variables, *self.discriminator.trainable_variables))
        return f"SN-GAN, {parameters:,} parameters, {self._replicator!r}"
