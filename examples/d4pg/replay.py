"""What the agent's replay holds: one n-step transition per item, in one Reverb table.

The table's rate limiter keeps the learner's sampling and the actors' writing in the ratio
`samples_per_insert` (with some slack), as Acme's D4PG does: neither side can race ahead, so
the learner replays each transition about samples_per_insert / batch_size times, however
fast the actors are.
"""

from __future__ import annotations

import dataclasses

from examples.d4pg.config import D4PGConfig

TABLE = "transitions"
FIELDS = ("observation", "action", "reward", "discount", "next_observation")


@dataclasses.dataclass(frozen=True)
class Spec:
    """The environment's sizes (flat observation and action vectors)."""

    observation_size: int
    action_size: int


def make_tables(config: D4PGConfig, spec: Spec) -> list:
    """The replay node's table (called in the replay node's process)."""
    import reverb
    import tensorflow as tf
    signature = {"observation": tf.TensorSpec([spec.observation_size], tf.float32),
                 "action": tf.TensorSpec([spec.action_size], tf.float32),
                 "reward": tf.TensorSpec([], tf.float32),
                 "discount": tf.TensorSpec([], tf.float32),
                 "next_observation": tf.TensorSpec([spec.observation_size], tf.float32)}
    if config.samples_per_insert:
        # Acme's slack: 10% of the ratio, over the first min_replay_size inserts.
        error_buffer = max(config.min_replay_size * 0.1 * config.samples_per_insert,
                           2.0 * config.batch_size)
        limiter = reverb.rate_limiters.SampleToInsertRatio(
            samples_per_insert=config.samples_per_insert,
            min_size_to_sample=config.min_replay_size, error_buffer=error_buffer)
    else:
        limiter = reverb.rate_limiters.MinSize(config.min_replay_size)
    return [reverb.Table(TABLE, sampler=reverb.selectors.Uniform(),
                         remover=reverb.selectors.Fifo(), max_size=config.replay_size,
                         rate_limiter=limiter, signature=signature)]
