"""The replicator's tests run TensorFlow in the test process: it gets four logical CPU
devices before anything initialises TensorFlow's devices (only possible before that)."""

import pytest

from tests.stacks import NO_TENSORFLOW

pytest.importorskip("tensorflow", reason=NO_TENSORFLOW)

from launchpad import replicator  # noqa: E402 - after the skip

replicator.use_logical_cpus(4)  # (mesh mode: 2x2 meshes)
