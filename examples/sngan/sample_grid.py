"""A PNG of generated digits: one row per class, drawn with matplotlib's Agg canvas (no
pyplot, so no display and no global figure state in a trainer process)."""

from __future__ import annotations

import os

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

_GAP = 1  # pixels of background between images


def write_sample_grid(images: np.ndarray, path: str) -> None:
    """Writes `images` (classes x per_class x 8 x 8, pixels in [-1, 1]) to `path` as a grid:
    row c holds the images of class c, labelled on the left."""
    classes, per_class, height, width = images.shape
    mosaic = np.full((classes * (height + _GAP) - _GAP, per_class * (width + _GAP) - _GAP),
                     -1.0, np.float32)
    for row in range(classes):
        for column in range(per_class):
            top, left = row * (height + _GAP), column * (width + _GAP)
            mosaic[top:top + height, left:left + width] = images[row, column]
    figure = Figure(figsize=(0.5 + 0.35 * per_class, 0.35 * classes))
    FigureCanvasAgg(figure)
    axes = figure.add_axes((0.06, 0.01, 0.93, 0.98))
    axes.imshow(mosaic, cmap="gray", vmin=-1.0, vmax=1.0, interpolation="nearest")
    axes.set_xticks([])
    axes.set_yticks([row * (height + _GAP) + (height - 1) / 2 for row in range(classes)],
                    [str(row) for row in range(classes)])
    axes.tick_params(length=0)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    figure.savefig(path)
