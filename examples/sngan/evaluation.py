"""How good generated digits are, judged against the real ones.

* recognised fraction: how often a classifier trained on the real digits names the class a
  sample was made for (chance: 10%). The classifier is scikit-learn's logistic regression on
  the [-1, 1] pixels: small, quick to fit, and blind to anything but the pixels, so a high
  fraction means the samples carry their class's strokes.
* spread ratio: the samples' within-class spread (each pixel's standard deviation over a
  class's samples, averaged over pixels and classes) over the real digits'. A generator that
  makes one image per class (mode collapse) can still be recognised; its spread is near 0.
"""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LogisticRegression


def _within_class_spread(images: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean([images[labels == label].std(axis=0).mean()
                          for label in np.unique(labels)]))


class DigitScorer:
    """Scores generated images against real `images` (n x 64, in [-1, 1]) and their
    `labels`, on which it fits its classifier."""

    def __init__(self, images: np.ndarray, labels: np.ndarray):
        self._classifier = LogisticRegression(max_iter=2_000).fit(images, labels)
        self._real_spread = _within_class_spread(images, labels)

    def recognised_fraction(self, images: np.ndarray, intended: np.ndarray) -> float:
        """The fraction of `images` (64 pixels each, any shape) classified as `intended`."""
        predicted = self._classifier.predict(np.reshape(images, (len(intended), -1)))
        return float(np.mean(predicted == intended))

    def spread_ratio(self, images: np.ndarray, intended: np.ndarray) -> float:
        """The within-class spread of `images` (made for classes `intended`) over the real
        digits': about 1 for samples as varied as the data, near 0 for a collapsed
        generator."""
        flat = np.reshape(images, (len(intended), -1))
        return _within_class_spread(flat, intended) / self._real_spread
