"""The critic's categorical value distribution (Bellemare et al., 2017), in TensorFlow.

The critic outputs logits over fixed atoms z_1 < ... < z_K, evenly spaced over [v_min, v_max].
A target distribution, shifted and shrunk by the Bellman update (r + d * z_j, with
probability p_j), falls between the atoms: `categorical_projection` puts it back on them, each
shifted atom's probability split between its two neighbours in proportion to closeness.
"""

from __future__ import annotations

import tensorflow as tf


def atoms(v_min: float, v_max: float, num_atoms: int) -> tf.Tensor:
    """The support: `num_atoms` evenly spaced values from v_min to v_max (float32)."""
    return tf.linspace(tf.constant(v_min, tf.float32), tf.constant(v_max, tf.float32),
                       num_atoms)


def categorical_projection(values: tf.Tensor, probabilities: tf.Tensor,
                           support: tf.Tensor) -> tf.Tensor:
    """Projects distributions onto `support`.

    Args:
      values: [batch, K] where each source atom lands (e.g. r + d * z), any real values.
      probabilities: [batch, K] each source atom's probability (rows sum to 1).
      support: [K'] the evenly spaced target atoms.
    Returns:
      [batch, K'] probabilities on `support` (rows sum to 1); a value beyond the support's
      ends counts as its nearest end.

    A value at position b (in units of the atoms' spacing) gives target atom i the weight
    max(0, 1 - |b - i|): all of it when it falls on i, split between the two neighbours
    otherwise. That triangle kernel is exactly the usual lower/upper split, without its
    special case for a value landing on an atom.
    """
    v_min, v_max = support[0], support[-1]
    spacing = (v_max - v_min) / tf.cast(tf.shape(support)[0] - 1, support.dtype)
    positions = (tf.clip_by_value(values, v_min, v_max) - v_min) / spacing  # [batch, K]
    targets = tf.range(tf.shape(support)[0], dtype=support.dtype)  # [K']
    weights = tf.nn.relu(1.0 - tf.abs(positions[:, :, None] - targets[None, None, :]))
    return tf.reduce_sum(probabilities[:, :, None] * weights, axis=1)


def mean_value(logits: tf.Tensor, support: tf.Tensor) -> tf.Tensor:
    """[batch] the expected value of each row's distribution (softmax of its logits)."""
    return tf.reduce_sum(tf.nn.softmax(logits) * support[None, :], axis=-1)
