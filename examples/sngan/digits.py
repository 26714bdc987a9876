"""scikit-learn's 8x8 digits (1,797 images of 10 classes, shipped inside scikit-learn, so
nothing is downloaded), scaled from 0..16 to [-1, 1], and the trainer's input pipeline."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from sklearn.datasets import load_digits

IMAGE_SIZE = 8
NUM_CLASSES = 10


def load_scaled() -> tuple[np.ndarray, np.ndarray]:
    """(images, labels): images flattened to 64 float32 pixels in [-1, 1], labels int32."""
    digits = load_digits()
    return digits.data.astype(np.float32) / 8.0 - 1.0, digits.target.astype(np.int32)


def input_fn(global_batch: int, noise_dim: int, seed: int) -> Callable:
    """The `input_fn` for `Replicator.distribute_dataset`: endless per-replica batches of
    (images, labels, noise, fake labels), the real digits reshuffled every epoch and the
    generator's noise and classes drawn with it, each input pipeline from its own seed."""
    images, labels = load_scaled()

    def make_dataset(input_context):
        import tensorflow as tf
        per_replica = input_context.get_per_replica_batch_size(global_batch)
        pipeline_seed = seed * 1_000 + input_context.input_pipeline_id
        real = (tf.data.Dataset.from_tensor_slices((images, labels))
                .shuffle(len(images), seed=pipeline_seed).repeat()
                .batch(per_replica, drop_remainder=True))

        def noise_and_classes(draw):
            seeds = tf.random.experimental.stateless_split(
                tf.stack([draw, tf.constant(seed, tf.int64)]), 2)
            return (tf.random.stateless_normal([per_replica, noise_dim], seeds[0]),
                    tf.random.stateless_uniform([per_replica], seeds[1], maxval=NUM_CLASSES,
                                                dtype=tf.int32))

        fake = tf.data.Dataset.random(seed=pipeline_seed).map(noise_and_classes)
        return (tf.data.Dataset.zip((real, fake))
                .map(lambda real_batch, fake_batch: (*real_batch, *fake_batch)).prefetch(2))

    return make_dataset
