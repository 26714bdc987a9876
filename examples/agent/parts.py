"""The agent's parts: the environment, the actor and the learner (launch.py wires them).

They live in a module of their own, not in launch.py (which runs as `__main__`), so node
processes import them by name: TensorFlow's AutoGraph needs the learner's source file.
"""

from __future__ import annotations

import numpy as np

import launchpad as lp

TABLE = "transitions"
GAMMA = 0.9
FLUSH_TIMEOUT_MS = 5_000
# The learner stops the program, then ends, and its server with it: an actor's call may fail
# a moment before the stop reaches the actor. So long it waits for the stop before it takes
# the failure for its own.
STOP_REACHES_SECS = 10.0


class Chain:
    """A corridor of `length` cells: start at the left end, step left or right; reaching the
    right end pays 1 and ends the episode, as does running out of `2 * length` steps. The
    observation is the cell, one-hot."""

    def __init__(self, length: int):
        self.length = length
        self._cell = 0
        self._steps = 0

    def observe(self) -> np.ndarray:
        return np.eye(self.length, dtype=np.float32)[self._cell]

    def reset(self) -> np.ndarray:
        self._cell, self._steps = 0, 0
        return self.observe()

    def step(self, action: int) -> tuple[np.ndarray, float, bool]:
        self._cell = min(max(self._cell + (1 if action == 1 else -1), 0), self.length - 1)
        self._steps += 1
        reward = 1.0 if self._cell == self.length - 1 else 0.0
        return self.observe(), reward, bool(reward) or self._steps >= 2 * self.length


def q_values(variables: dict, observation: np.ndarray) -> np.ndarray:
    return observation @ variables["kernel"] + variables["bias"]


def greedy_steps_to_goal(variables: dict, length: int) -> int | None:
    """How many steps the greedy policy takes to the goal (None: it never gets there)."""
    env = Chain(length)
    observation, done, steps = env.reset(), False, 0
    while not done:
        observation, reward, done = env.step(int(np.argmax(q_values(variables, observation))))
        steps += 1
    return steps if reward else None


class Actor:
    """Plays episodes with an epsilon-greedy policy on the learner's latest variables (read
    from the cacher) and writes every transition into the replay table."""

    def __init__(self, replay, variable_source, actor_id: int, length: int, epsilon: float):
        self._replay = replay
        self._variables = variable_source
        self._id = actor_id
        self._env = Chain(length)
        self._epsilon = epsilon
        self._rng = np.random.default_rng(actor_id)

    def _act(self, variables: dict, observation: np.ndarray) -> int:
        values = q_values(variables, observation)
        best = np.flatnonzero(values == values.max())  # ties broken at random
        if self._rng.random() < self._epsilon:
            return int(self._rng.integers(2))
        return int(self._rng.choice(best))

    def run(self) -> None:
        episodes = goals = 0
        # Not `with`: leaving that block flushes without a deadline, which waits forever for
        # a replay node that stopped first. Every episode is flushed (with one) instead.
        writer = self._replay.trajectory_writer(num_keep_alive_refs=2)
        try:
            while not lp.stop_event().is_set():
                goals += self._play_episode(writer)
                episodes += 1
        except Exception:
            if not lp.stop_event().wait(STOP_REACHES_SECS):
                raise
            # The program is stopping: the learner, the cacher or the replay node may be gone.
        finally:
            writer.close()
        print(f"actor {self._id}: {episodes} episodes, {goals} reached the goal", flush=True)

    def _play_episode(self, writer) -> int:
        """Plays one episode, writing each transition as an item; 1 if it reached the goal."""
        variables = self._variables.get_variables()
        observation, done, reward = self._env.reset(), False, 0.0
        while not done:
            action = self._act(variables, observation)
            observation_next, reward, done = self._env.step(action)
            writer.append({"observation": observation, "action": np.int32(action),
                           "reward": np.float32(reward),
                           "discount": np.float32(0.0 if reward else GAMMA),
                           "next_observation": observation_next})
            writer.create_item(TABLE, 1.0, {k: writer.history[k][-1] for k in (
                "observation", "action", "reward", "discount", "next_observation")})
            observation = observation_next
        if not lp.stop_event().is_set():  # else the replay node may be gone: Reverb would
            writer.flush(timeout_ms=FLUSH_TIMEOUT_MS)  # retry until the deadline
        return int(reward)


class Learner:
    """Q-learning on batches sampled from the replay table, with a target network; its
    variables are served to the actors (through the cacher). After `num_steps` it checks the
    greedy policy and stops the program."""

    def __init__(self, replay, length: int, num_steps: int, batch_size: int = 64,
                 learning_rate: float = 0.5, target_every: int = 25):
        import reverb
        import tensorflow as tf

        from launchpad import replicator
        self._length = length
        self._num_steps = num_steps
        self._target_every = target_every
        self._replicator = replicator.Replicator()  # one device: `devices=` scales it out
        with self._replicator.scope():
            self._q = tf.keras.layers.Dense(2, kernel_initializer="zeros")
            self._target = tf.keras.layers.Dense(2, kernel_initializer="zeros")
            self._q.build([None, length])
            self._target.build([None, length])
            self._optimizer = tf.keras.optimizers.SGD(learning_rate)
            self._optimizer.build(self._q.trainable_variables)

        def input_fn(input_context):
            dataset = reverb.TrajectoryDataset.from_table_signature(
                server_address=replay.server_address, table=TABLE,
                max_in_flight_samples_per_worker=2 * batch_size)
            return dataset.map(lambda sample: sample.data).batch(
                input_context.get_per_replica_batch_size(batch_size))

        self._batches = iter(self._replicator.distribute_dataset(input_fn))

    def _step_fn(self, batch):
        import tensorflow as tf
        target = batch["reward"] + batch["discount"] * tf.reduce_max(
            self._target(batch["next_observation"]), axis=1)
        with tf.GradientTape() as tape:
            chosen = tf.gather(self._q(batch["observation"]), batch["action"], batch_dims=1)
            loss = tf.reduce_mean((chosen - tf.stop_gradient(target)) ** 2)
        variables = self._q.trainable_variables
        self._optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables,
                                            strict=True))
        return loss

    def get_variables(self) -> dict:
        kernel, bias = self._q.get_weights()
        return {"kernel": kernel, "bias": bias}

    def run(self) -> None:
        for step in range(1, self._num_steps + 1):
            loss = self._replicator.reduce(self._replicator.run(self._step_fn, self._batches),
                                           "mean")
            if step % self._target_every == 0:
                self._target.set_weights(self._q.get_weights())
            if step % 100 == 0:
                print(f"learner: step {step}, loss {float(loss):.4f}", flush=True)
        steps = greedy_steps_to_goal(self.get_variables(), self._length)
        outcome = (f"reaches the goal in {steps} steps (the fewest possible: "
                   f"{self._length - 1})" if steps else "does not reach the goal")
        print(f"learner: after {self._num_steps} steps the greedy policy {outcome}",
              flush=True)
        lp.stop()
