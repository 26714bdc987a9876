"""The class-conditional GAN's networks and its hinge losses, on flattened 8x8 digits.

Generator: noise and the class (one-hot, concatenated) through two ReLU layers to 64 pixels in
[-1, 1] (tanh). Discriminator: every weight spectrally normalised; two leaky-ReLU layers make
features h of the image, and its score is a linear function of h plus the projection of h on
the class's embedding (Miyato & Koyama, 2018): `w^T h + e_y^T h`. Both are plain `tf.Module`s
of `tf.Variable`s, so they behave the same under Keras 2 and Keras 3.
"""

from __future__ import annotations

import math

import tensorflow as tf

from examples.sngan.spectral_norm import SpectralNorm

PIXELS = 64
NUM_CLASSES = 10
LEAKY_SLOPE = 0.2


def _he_normal(shape: list[int], seed: tf.Tensor) -> tf.Tensor:
    return tf.random.stateless_normal(shape, seed) * math.sqrt(2.0 / shape[0])


class Dense(tf.Module):
    """`x @ W + b`, with W spectrally normalised if `spectral`."""

    def __init__(self, inputs: int, outputs: int, seed: tf.Tensor, spectral: bool,
                 name: str | None = None):
        super().__init__(name=name)
        weight_seed, u_seed = tf.random.experimental.stateless_split(seed, 2)
        initial = _he_normal([inputs, outputs], weight_seed)
        self.kernel = SpectralNorm(initial, u_seed) if spectral else tf.Variable(initial)
        self.bias = tf.Variable(tf.zeros([outputs]), name="bias")

    def __call__(self, x: tf.Tensor, update_u: bool = False) -> tf.Tensor:
        kernel = self.kernel(update_u) if isinstance(self.kernel, SpectralNorm) else self.kernel
        return tf.matmul(x, kernel) + self.bias


class Generator(tf.Module):
    """(noise, class) -> a flattened image in [-1, 1]."""

    def __init__(self, noise_dim: int, hidden: int, seed: int):
        super().__init__(name="generator")
        seeds = tf.random.experimental.stateless_split([seed, 0], 3)
        self._layers = [Dense(noise_dim + NUM_CLASSES, hidden, seeds[0], spectral=False),
                        Dense(hidden, hidden, seeds[1], spectral=False),
                        Dense(hidden, PIXELS, seeds[2], spectral=False)]

    def __call__(self, noise: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        x = tf.concat([noise, tf.one_hot(labels, NUM_CLASSES)], axis=1)
        for layer in self._layers[:-1]:
            x = tf.nn.relu(layer(x))
        return tf.tanh(self._layers[-1](x))


class Discriminator(tf.Module):
    """(flattened image, class) -> a score, high for real; every weight spectrally normalised.
    `update_u` runs the power iterations' step: once per training step."""

    def __init__(self, hidden: int, seed: int):
        super().__init__(name="discriminator")
        seeds = tf.random.experimental.stateless_split([seed, 1], 4)
        self._features = [Dense(PIXELS, hidden, seeds[0], spectral=True),
                          Dense(hidden, hidden, seeds[1], spectral=True)]
        self._linear = Dense(hidden, 1, seeds[2], spectral=True)
        embedding_seed, u_seed = tf.random.experimental.stateless_split(seeds[3], 2)
        self._embedding = SpectralNorm(
            _he_normal([NUM_CLASSES, hidden], embedding_seed), u_seed, name="embedding")

    def __call__(self, images: tf.Tensor, labels: tf.Tensor, update_u: bool = False
                 ) -> tf.Tensor:
        h = images
        for layer in self._features:
            h = tf.nn.leaky_relu(layer(h, update_u), LEAKY_SLOPE)
        projection = tf.reduce_sum(tf.gather(self._embedding(update_u), labels) * h, axis=1)
        return tf.squeeze(self._linear(h, update_u), axis=1) + projection


def discriminator_hinge_loss(real_scores: tf.Tensor, fake_scores: tf.Tensor) -> tf.Tensor:
    """Per pair of examples: relu(1 - D(real)) + relu(1 + D(fake)); the loss is its mean."""
    return tf.nn.relu(1.0 - real_scores) + tf.nn.relu(1.0 + fake_scores)


def generator_hinge_loss(fake_scores: tf.Tensor) -> tf.Tensor:
    """Per example: -D(fake); the loss is its mean."""
    return -fake_scores
