"""The agent's actors and its evaluator: each plays its own Pendulum with the learner's policy.

An actor explores (Gaussian noise on the policy's action), turns its steps into n-step
transitions and writes each into the replay table with a `trajectory_writer`; every
`variable_update_period` steps it pulls the policy's latest weights. The evaluator plays
without noise every `eval_every_secs` and records its average return with the counter; it
needs neither Reverb nor TensorFlow.
"""

from __future__ import annotations

import numpy as np

import launchpad as lp
from examples.d4pg import policy
from examples.d4pg.config import ENVIRONMENT, D4PGConfig
from examples.d4pg.n_step import NStepTransitions, Transition
from examples.d4pg.replay import FIELDS, TABLE

# Items a writer may have sent but not seen confirmed (Acme's adders keep 5): waiting for
# the rest is how an actor feels the table's rate limiter, and keeps memory bounded.
MAX_IN_FLIGHT_ITEMS = 5
FLUSH_TIMEOUT_MS = 1_000  # each wait's length: between waits the actor checks for a stop


class _Player:
    """An environment of its own, and the policy's weights as last pulled."""

    def __init__(self, variable_source, seed: int):
        import gymnasium
        self._variables = variable_source
        self._env = gymnasium.make(ENVIRONMENT)
        self._low = self._env.action_space.low
        self._high = self._env.action_space.high
        self._seed = seed
        self._episodes = 0
        self.weights = variable_source.get_variables()

    def pull(self) -> None:
        self.weights = self._variables.get_variables()

    def reset(self) -> np.ndarray:
        observation, _ = self._env.reset(seed=self._seed * 100_003 + self._episodes)
        self._episodes += 1
        return observation.astype(np.float32)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool]:
        observation, reward, terminated, truncated, _ = self._env.step(
            policy.to_environment(action, self._low, self._high))
        return observation.astype(np.float32), float(reward), terminated, truncated


class Actor:
    """Explores and writes n-step transitions into replay until the program stops."""

    def __init__(self, replay, variable_source, counter, config: D4PGConfig,
                 actor_id: int | None = None):
        # By default its index in its group: actors a running group grows by (`launchpad
        # scale`) are made with the first one's arguments, and explore differently still.
        actor_id = lp.context.current().index if actor_id is None else actor_id
        self._replay = replay
        self._counter = counter
        self._config = config
        self._player = _Player(variable_source, seed=config.seed * 1000 + actor_id + 1)
        self._rng = np.random.default_rng([config.seed, actor_id])
        self._transitions = NStepTransitions(config.n_step, config.discount)

    def run(self) -> None:
        # Not `with`: leaving that block flushes without a deadline, which waits forever for
        # a replay node that stopped first; items still in flight at a stop are dropped.
        writer = self._replay.trajectory_writer(num_keep_alive_refs=1)
        steps = 0
        try:
            while not lp.stop_event().is_set():
                episode_steps = self._play_episode(writer, steps)
                steps += episode_steps
                self._counter.increment(actor_steps=episode_steps, actor_episodes=1)
        except Exception:
            if not lp.stop_event().is_set():
                raise
            # The program is stopping: the replay node or the counter may be gone already.
        finally:
            writer.close()

    def _play_episode(self, writer, steps: int) -> int:
        """One episode, every transition written; returns its length."""
        observation = self._player.reset()
        self._transitions.start(observation)
        done, length = False, 0
        while not done:
            if (steps + length) % self._config.variable_update_period == 0:
                self._player.pull()
            action = policy.explore(policy.act(self._player.weights, observation),
                                    self._config.sigma, self._rng)
            observation, reward, terminated, truncated = self._player.step(action)
            for transition in self._transitions.step(action, reward, observation,
                                                     terminated, truncated):
                _write(writer, transition)
            done = terminated or truncated
            length += 1
        return length


def _write(writer, transition: Transition) -> None:
    writer.append({"observation": transition.observation,
                   "action": transition.action.astype(np.float32),
                   "reward": np.float32(transition.reward),
                   "discount": np.float32(transition.discount),
                   "next_observation": transition.next_observation})
    writer.create_item(TABLE, 1.0, {field: writer.history[field][-1] for field in FIELDS})
    import reverb
    while True:
        try:
            writer.flush(block_until_num_items=MAX_IN_FLIGHT_ITEMS, timeout_ms=FLUSH_TIMEOUT_MS)
            return
        except reverb.errors.DeadlineExceededError:
            if lp.stop_event().is_set():
                raise


class Evaluator:
    """Plays `eval_episodes` noiseless episodes every `eval_every_secs`, records the mean."""

    def __init__(self, variable_source, counter, config: D4PGConfig):
        self._counter = counter
        self._config = config
        self._player = _Player(variable_source, seed=config.seed * 1000)

    def evaluate(self) -> float:
        """The policy's average return over `eval_episodes` fresh episodes."""
        self._player.pull()
        returns = []
        for _ in range(self._config.eval_episodes):
            observation, done, total = self._player.reset(), False, 0.0
            while not done:
                observation, reward, terminated, truncated = self._player.step(
                    policy.act(self._player.weights, observation))
                total += reward
                done = terminated or truncated
            returns.append(total)
        return float(np.mean(returns))

    def run(self) -> None:
        try:
            while True:
                self._counter.record_evaluation(self.evaluate())
                if lp.stop_event().wait(self._config.eval_every_secs):
                    return
        except Exception:
            if not lp.stop_event().is_set():
                raise
