"""Evolution strategies on CartPole: the master's search and the workers' evaluations.

The policy is linear: the action is the argmax of `W @ observation`, W of 2 x 4. Each
generation the master draws `pairs` Gaussian perturbations of its parameters (antithetic:
+eps and -eps), asks the workers to evaluate them (one episode each, `scatter`), and moves
the parameters along the returns' centred ranks, with Adam. Its state - parameters, Adam's
moments, the generation, its random generator - is what `save_state` returns.
"""

from __future__ import annotations

import threading

import numpy as np

SHAPE = (2, 4)  # actions x observations of CartPole-v1
MAX_RETURN = 500.0  # CartPole-v1's episodes end after 500 steps


def episode_return(params: np.ndarray, seed: int) -> float:
    """One episode of CartPole-v1 (reset with `seed`) under the linear policy `params`."""
    import gymnasium
    env = gymnasium.make("CartPole-v1")
    observation, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        action = int(np.argmax(params @ observation))
        observation, reward, terminated, truncated, _ = env.step(action)
        total += reward
        done = terminated or truncated
    env.close()
    return total


class Worker:
    """Evaluates perturbations of the master's parameters."""

    def evaluate(self, params: np.ndarray, noise_seeds: list[int], sigma: float,
                 episode_seed: int) -> list[tuple[float, float]]:
        """For each noise seed, the returns of params + sigma * eps and params - sigma * eps."""
        results = []
        for noise_seed in noise_seeds:
            eps = np.random.default_rng(noise_seed).standard_normal(SHAPE)
            results.append((episode_return(params + sigma * eps, episode_seed),
                            episode_return(params - sigma * eps, episode_seed)))
        return results


def centred_ranks(returns: np.ndarray) -> np.ndarray:
    """Returns replaced by their ranks, scaled to [-0.5, 0.5] (robust to their scale)."""
    ranks = np.empty(returns.size)
    ranks[returns.ravel().argsort()] = np.arange(returns.size)
    return (ranks / (returns.size - 1) - 0.5).reshape(returns.shape)


class Search:
    """The master's state and its step: what save_state and restore_state carry."""

    def __init__(self, seed: int, learning_rate: float = 0.05, sigma: float = 0.1):
        self.lock = threading.Lock()
        self.params = np.zeros(SHAPE)
        self.m = np.zeros(SHAPE)
        self.v = np.zeros(SHAPE)
        self.generation = 0
        self.best_mean = 0.0
        self.rng = np.random.default_rng(seed)
        self.learning_rate = learning_rate
        self.sigma = sigma

    def noise_seeds(self, pairs: int) -> list[int]:
        return [int(s) for s in self.rng.integers(0, 2**31, size=pairs)]

    def step(self, noise_seeds: list[int], returns: np.ndarray) -> None:
        """One Adam step along the ES gradient estimate; `returns` is pairs x 2 (+, -)."""
        weights = centred_ranks(returns)
        gradient = np.zeros(SHAPE)
        for noise_seed, (plus, minus) in zip(noise_seeds, weights, strict=True):
            gradient += (plus - minus) * np.random.default_rng(noise_seed).standard_normal(SHAPE)
        gradient /= len(noise_seeds) * self.sigma
        self.generation += 1
        self.m = 0.9 * self.m + 0.1 * gradient
        self.v = 0.999 * self.v + 0.001 * gradient**2
        m_hat = self.m / (1 - 0.9**self.generation)
        v_hat = self.v / (1 - 0.999**self.generation)
        self.params = self.params + self.learning_rate * m_hat / (np.sqrt(v_hat) + 1e-8)
        self.best_mean = max(self.best_mean, float(returns.mean()))

    def state(self) -> dict:
        return {"params": self.params.copy(), "m": self.m.copy(), "v": self.v.copy(),
                "generation": self.generation, "best_mean": self.best_mean,
                "rng": self.rng.bit_generator.state}

    def restore(self, state: dict) -> None:
        self.params, self.m, self.v = state["params"], state["m"], state["v"]
        self.generation, self.best_mean = state["generation"], state["best_mean"]
        self.rng.bit_generator.state = state["rng"]
