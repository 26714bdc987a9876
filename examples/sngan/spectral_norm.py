"""Spectral normalisation (Miyato et al., 2018): a weight matrix divided by an estimate of its
largest singular value, so the layer it feeds changes its input by a factor of at most about 1.

The estimate comes from the power iteration: each weight keeps a persistent unit vector `u`
(a non-trainable variable) that one iteration per training step moves towards the top right
singular vector, so after a few steps the estimate tracks the weight as it trains, at the cost of
two matrix-vector products a step.
"""

from __future__ import annotations

import tensorflow as tf


def power_iteration(weight: tf.Tensor, u: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """One power iteration on `weight` (rows x cols) from the unit vector `u` (cols): returns
    the next `u` and sigma = v^T W u, the estimate of the largest singular value. Gradients flow
    through sigma to the weight only: u and v are constants of the step, as in the paper."""
    v = tf.stop_gradient(tf.math.l2_normalize(tf.linalg.matvec(weight, u)))
    u = tf.stop_gradient(tf.math.l2_normalize(tf.linalg.matvec(weight, v, transpose_a=True)))
    sigma = tf.tensordot(v, tf.linalg.matvec(weight, u), axes=1)
    return u, sigma


class SpectralNorm(tf.Module):
    """A trainable weight matrix, read divided by its largest singular value's estimate.

    `u` is created with `ONLY_FIRST_REPLICA` aggregation: every replica computes the same next
    `u` from the same (mirrored) weight, so a replica's assignment is the first one's.
    """

    def __init__(self, initial_weight: tf.Tensor, seed: tf.Tensor, name: str | None = None):
        super().__init__(name=name)
        self.weight = tf.Variable(initial_weight, name="weight")
        columns = int(initial_weight.shape[1])
        self.u = tf.Variable(
            tf.math.l2_normalize(tf.random.stateless_normal([columns], seed)), trainable=False,
            name="u", aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

    def __call__(self, update_u: bool = False) -> tf.Tensor:
        """The normalised weight, W / sigma. With `update_u` (once per training step) the
        iteration's new `u` is kept; without, the estimate is the same iteration's from the
        stored `u`, which stays as it is."""
        u, sigma = power_iteration(self.weight, self.u)
        if update_u:
            self.u.assign(u)
        return self.weight / sigma
