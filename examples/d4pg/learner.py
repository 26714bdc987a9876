"""The D4PG learner: a distributional critic and a deterministic policy, trained from replay.

Written once against `launchpad.replicator`: `lp.ReplicatedNode` builds it inside the
replicator's scope, so `--devices` and `--num_workers` replicate it without a change here.
Each replica samples its share of the batch from the replay table and computes

    critic   cross-entropy between its distribution Z(o, a) and the projection, onto the
             atoms, of r + d * Z'(o', pi'(o')) (target networks ', d = discount^n)
    policy   - E[Z(o, pi(o))]: the deterministic policy gradient through the critic's mean

with gradients clipped by norm and applied by Adam; the target networks copy the online ones
every `target_update_period` steps. Its node's handle serves `get_variables()`: the policy's
weights, which actors and the evaluator pull (through a CacherNode).

It lives in a module of its own (not launch.py, which runs as `__main__`) so learner
processes import it by name: TensorFlow's AutoGraph needs the step function's source file.
"""

from __future__ import annotations

import launchpad as lp
from examples.d4pg.config import D4PGConfig
from examples.d4pg.replay import TABLE, Spec

REPORT_EVERY = 100  # learner steps between reports to the counter


class D4PGLearner:
    """Trains on batches from `replay`, reports to `counter` (the chief only)."""

    def __init__(self, replicator, replay, counter, config: D4PGConfig, spec: Spec):
        import reverb
        import tensorflow as tf

        from examples.d4pg import distributional, networks
        self._replicator = replicator
        self._replay = replay
        self._counter = counter
        self._config = config
        tf.random.set_seed(config.seed)
        self._atoms = distributional.atoms(config.v_min, config.v_max, config.num_atoms)
        sizes = (spec.observation_size, spec.action_size, config.hidden_sizes)
        self.policy = networks.make_policy(*sizes)
        self.critic = networks.make_critic(*sizes, config.num_atoms)
        self._target_policy = networks.make_policy(*sizes)
        self._target_critic = networks.make_critic(*sizes, config.num_atoms)
        self._update_targets()
        self._policy_optimizer = tf.keras.optimizers.Adam(config.policy_learning_rate)
        self._critic_optimizer = tf.keras.optimizers.Adam(config.critic_learning_rate)
        self._policy_optimizer.build(self.policy.trainable_variables)
        self._critic_optimizer.build(self.critic.trainable_variables)

        def input_fn(input_context):
            per_replica = input_context.get_per_replica_batch_size(config.batch_size)
            dataset = reverb.TrajectoryDataset.from_table_signature(
                server_address=replay.server_address, table=TABLE,
                max_in_flight_samples_per_worker=2 * per_replica)
            return dataset.map(lambda sample: sample.data).batch(
                per_replica, drop_remainder=True).prefetch(2)

        self._batches = iter(replicator.distribute_dataset(input_fn))
        self._steps = 0

    def _update_targets(self) -> None:
        self._target_policy.set_weights(self.policy.get_weights())
        self._target_critic.set_weights(self.critic.get_weights())

    def _step_fn(self, batch):
        """One replica's part of a step; its losses are scaled by the global batch, so the
        replicas' gradients add up to the whole batch's."""
        import tensorflow as tf

        from examples.d4pg.distributional import categorical_projection, mean_value
        config = self._config
        observation, action = batch["observation"], batch["action"]
        next_observation = batch["next_observation"]
        with tf.GradientTape(persistent=True) as tape:
            logits = self.critic(tf.concat([observation, action], axis=1))
            next_logits = self._target_critic(tf.concat(
                [next_observation, self._target_policy(next_observation)], axis=1))
            shifted = (config.reward_scale * batch["reward"][:, None]
                       + batch["discount"][:, None] * self._atoms[None, :])
            target = tf.stop_gradient(categorical_projection(
                shifted, tf.nn.softmax(next_logits), self._atoms))
            critic_loss = tf.reduce_sum(tf.nn.softmax_cross_entropy_with_logits(
                labels=target, logits=logits)) / config.batch_size
            value = mean_value(self.critic(tf.concat(
                [observation, self.policy(observation)], axis=1)), self._atoms)
            policy_loss = -tf.reduce_sum(value) / config.batch_size
        self._apply(tape, critic_loss, self.critic, self._critic_optimizer)
        self._apply(tape, policy_loss, self.policy, self._policy_optimizer)
        del tape
        return {"critic_loss": critic_loss, "policy_loss": policy_loss}

    def _apply(self, tape, loss, network, optimizer) -> None:
        """The gradient of `loss` for `network` alone (the policy's loss also reaches the
        critic, which must not learn from it), clipped by norm, applied."""
        import tensorflow as tf
        variables = network.trainable_variables
        gradients, _ = tf.clip_by_global_norm(tape.gradient(loss, variables),
                                              self._config.clip_grad_norm)
        optimizer.apply_gradients(zip(gradients, variables, strict=True))

    def get_variables(self) -> list:
        """The policy's weights (numpy arrays, `policy.act`'s order)."""
        return self.policy.get_weights()

    def step(self) -> dict:
        """One replicated training step; its losses (the global batch's)."""
        losses = self._replicator.run(self._step_fn, self._batches)
        self._steps += 1
        if self._steps % self._config.target_update_period == 0:
            self._update_targets()
        return losses

    def run(self) -> None:
        """Trains until the program stops; the chief reports to the counter every
        REPORT_EVERY steps: steps done, the replay table's size, the losses."""
        while not lp.stop_event().is_set():
            losses = self.step()
            if self._steps % REPORT_EVERY == 0:
                # Every worker reduces (a collective: all of them take part), the chief reports.
                reduced = {name: float(self._replicator.reduce(value, "sum"))
                           for name, value in losses.items()}
                if self._replicator.is_chief:
                    self._report(reduced)

    def _report(self, reduced: dict) -> None:
        table = self._replay.server_info()[TABLE]
        self._counter.increment(learner_steps=REPORT_EVERY)
        self._counter.set(replay_size=table.current_size, **reduced)
