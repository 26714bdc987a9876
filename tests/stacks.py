"""Which optional ML stacks this interpreter has, and the marks that skip a test without one.

TensorFlow (the `tensorflow` extra) exists on every Python the project supports: 2.15 on
Python <= 3.11, the newest (Keras 3) on 3.12+; `make test` installs it in the main venv and
the 3.13 one, so the TensorFlow tests run in both. dm-reverb exists only beside TensorFlow 2.15
on Python <= 3.11 (the `reverb` extra), so its tests run in the main venv only.
"""

import importlib.util

import pytest

NO_TENSORFLOW = "TensorFlow is not installed (the `tensorflow` extra of pyproject.toml)"
NO_REVERB = ("dm-reverb needs Python <= 3.11 and TensorFlow 2.15 (the `reverb` extra of "
             "pyproject.toml, installed in the main venv)")

needs_tensorflow = pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                                      reason=NO_TENSORFLOW)
needs_reverb = pytest.mark.skipif(importlib.util.find_spec("reverb") is None, reason=NO_REVERB)
