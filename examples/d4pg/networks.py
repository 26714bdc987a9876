"""The D4PG networks, in Keras: a deterministic policy and a distributional critic.

    policy  observation -> MLP (ReLU) -> tanh: an action in [-1, 1] per dimension
    critic  [observation, action] -> MLP (ReLU) -> logits over the value atoms

The policy's weights are what actors and the evaluator pull; they run it with numpy
(`policy.py`), so the layer order here and the forward pass there must match.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf


def _mlp(hidden_sizes: Sequence[int], outputs: int, activation: str | None,
         name: str) -> tf.keras.Sequential:
    layers = [tf.keras.layers.Dense(size, activation="relu") for size in hidden_sizes]
    final = tf.keras.layers.Dense(outputs, activation=activation,
                                  kernel_initializer=tf.keras.initializers.RandomUniform(
                                      -3e-3, 3e-3))  # small outputs at first, as in DDPG
    return tf.keras.Sequential([*layers, final], name=name)


def make_policy(observation_size: int, action_size: int,
                hidden_sizes: Sequence[int]) -> tf.keras.Sequential:
    policy = _mlp(hidden_sizes, action_size, "tanh", "policy")
    policy.build([None, observation_size])
    return policy


def make_critic(observation_size: int, action_size: int, hidden_sizes: Sequence[int],
                num_atoms: int) -> tf.keras.Sequential:
    """The critic takes the observation and action concatenated: [batch, obs + action]."""
    critic = _mlp(hidden_sizes, num_atoms, None, "critic")
    critic.build([None, observation_size + action_size])
    return critic
