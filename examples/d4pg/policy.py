"""The policy as actors and the evaluator run it: numpy, on weights pulled from the learner.

One observation at a time, a numpy forward pass costs a few microseconds where a TensorFlow
call costs a hundred; and the evaluator, which runs only this, never imports TensorFlow.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def act(weights: Sequence[np.ndarray], observation: np.ndarray) -> np.ndarray:
    """networks.make_policy's forward pass: (kernel, bias) pairs, ReLU between, tanh last."""
    x = np.asarray(observation, dtype=np.float32)
    last = len(weights) // 2 - 1
    for i in range(0, len(weights), 2):
        x = x @ weights[i] + weights[i + 1]
        x = np.tanh(x) if i // 2 == last else np.maximum(x, 0.0)
    return x


def explore(action: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """The action plus Gaussian noise of scale `sigma`, clipped to [-1, 1]."""
    noisy = action + sigma * rng.standard_normal(action.shape).astype(np.float32)
    return np.clip(noisy, -1.0, 1.0)


def to_environment(action: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """A policy action in [-1, 1] scaled to the environment's [low, high]."""
    return low + (action + 1.0) * 0.5 * (high - low)
