"""N-step transitions, made by the actors as they step (numpy only).

Each step t yields, once n later steps are known, the transition

    (o_t, a_t, R = r_t + g r_{t+1} + ... + g^(n-1) r_{t+n-1}, discount = g^n, o_{t+n})

which the learner bootstraps as R + discount * Q(o_{t+n}, pi(o_{t+n})). An episode that
terminates ends every pending transition with discount 0 (nothing lies beyond); one that is
truncated (a time limit, as Pendulum's 200 steps) ends them with the steps they have, m < n,
and discount g^m: the state after the limit still has a value.
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Transition:
    observation: np.ndarray
    action: np.ndarray
    reward: float
    discount: float
    next_observation: np.ndarray


class NStepTransitions:
    """Turns one episode's steps into n-step transitions; `start` begins each episode."""

    def __init__(self, n: int, discount: float):
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        self._n = n
        self._discount = discount
        self._pending: collections.deque = collections.deque()  # (observation, action, reward)
        self._observation: np.ndarray | None = None

    def start(self, observation: np.ndarray) -> None:
        self._pending.clear()
        self._observation = observation

    def step(self, action: np.ndarray, reward: float, next_observation: np.ndarray,
             terminated: bool = False, truncated: bool = False) -> list[Transition]:
        """Records a step; returns the transitions it completes (at an episode's end, all
        still pending)."""
        if self._observation is None:
            raise RuntimeError("step() before start(): begin each episode with start()")
        self._pending.append((self._observation, action, float(reward)))
        self._observation = next_observation
        if terminated or truncated:
            finished = [self._transition(terminated)
                        for _ in range(len(self._pending))]
            self._observation = None
            return finished
        if len(self._pending) == self._n:
            return [self._transition(terminated=False)]
        return []

    def _transition(self, terminated: bool) -> Transition:
        """The oldest pending step's transition, over every step recorded since (removed)."""
        rewards = np.array([reward for _, _, reward in self._pending], dtype=np.float64)
        powers = self._discount ** np.arange(len(rewards))
        observation, action, _ = self._pending.popleft()
        bootstrap = 0.0 if terminated else self._discount ** len(rewards)
        return Transition(observation, action, float(rewards @ powers), bootstrap,
                          self._observation)
