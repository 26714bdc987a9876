"""The replicator's tests run TensorFlow in the test process: it gets two logical CPU
devices before anything initialises TensorFlow's devices (only possible before that)."""

import pytest

pytest.importorskip("tensorflow")

from launchpad.replicator import replicator  # noqa: E402 - after the skip

replicator.use_logical_cpus(2)
