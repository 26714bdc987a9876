"""The data: scikit-learn's handwritten digits (1,797 8x8 grey images of 0-9, shipped with the
package, so nothing is downloaded), split once into a training and a held-out test set, and
upsampled to the network's image size.

The split is fixed (a seeded permutation), so every process of a program and every run of it
tests on the same images. The images stay 8x8 until a batch is made: the input pipeline carries
(and an async chief ships to its workers) 64 values per image, not image_size^2 * 3.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

NUM_CLASSES = 10
TEST_FRACTION = 0.2
SPLIT_SEED = 0


@dataclasses.dataclass(frozen=True)
class DigitsSplit:
    """Images (float32 in [0, 1], [n, 8, 8]) and labels (int32, [n]) of each part."""

    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray


def load_split(test_fraction: float = TEST_FRACTION, seed: int = SPLIT_SEED) -> DigitsSplit:
    """The digits, shuffled by `seed` and cut into train and test (`test_fraction` of them)."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    images = (digits.images / digits.images.max()).astype(np.float32)
    labels = digits.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(labels))
    test, train = np.split(order, [round(len(order) * test_fraction)])
    return DigitsSplit(images[train], labels[train], images[test], labels[test])


def upsample(images: tf.Tensor, image_size: int) -> tf.Tensor:
    """[n, 8, 8] images in [0, 1] -> [n, image_size, image_size, 3] in [-1, 1] (bilinear; the
    grey level repeated in the three channels the network takes)."""
    resized = tf.image.resize(images[..., tf.newaxis], [image_size, image_size])
    return tf.repeat(resized * 2.0 - 1.0, 3, axis=-1)


def train_input_fn(split: DigitsSplit, global_batch: int, image_size: int):
    """`replicator.distribute_dataset`'s input function: the training images, endlessly and
    freshly shuffled, in per-replica batches; each input pipeline (sync worker) reads its own
    shard."""

    def input_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        per_replica = input_context.get_per_replica_batch_size(global_batch)
        examples = tf.data.Dataset.from_tensor_slices((split.train_images, split.train_labels))
        shard = examples.shard(input_context.num_input_pipelines,
                               input_context.input_pipeline_id)
        return (shard.shuffle(len(split.train_labels)).repeat()
                .batch(per_replica, drop_remainder=True)
                .map(lambda images, labels: (upsample(images, image_size), labels))
                .prefetch(2))

    return input_fn
