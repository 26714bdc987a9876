"""pytest fixtures of a real Slurm cluster on simulated hosts (registered for the whole test tree
by tests/conftest.py's `pytest_plugins`).

`slurm_cluster` is session-scoped: the daemons start once (about a second) and serve every test
that asks for it; it skips, saying why, where it cannot run (not root, no `ip`, or Slurm or munge
not installed: `make system-packages` installs them).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from tests.cluster.netns import HostNetwork
from tests.cluster.slurm import SlurmCluster, missing_binaries

HOSTS = 3


def cluster_unavailable() -> str | None:
    """Why a Slurm cluster on network namespaces cannot run here, or None if it can."""
    if os.geteuid() != 0:
        return "the Slurm cluster tests need root (network namespaces, slurmd)"
    if shutil.which("ip") is None:
        return "the Slurm cluster tests need `ip` (iproute2) for network namespaces"
    missing = missing_binaries()
    if missing:
        return (f"Slurm/munge not installed (missing: {', '.join(missing)}); "
                "`make system-packages` installs them")
    return None


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """A started Slurm cluster of 3 hosts (`node1`..`node3`, each its own network namespace
    and address), stopped, leaving no process behind, at the end of the session."""
    reason = cluster_unavailable()
    if reason:
        pytest.skip(reason)
    with HostNetwork(HOSTS) as network:
        with SlurmCluster(str(tmp_path_factory.mktemp("slurm")), network) as cluster:
            yield cluster
