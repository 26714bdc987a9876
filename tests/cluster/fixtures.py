"""pytest fixtures of real clusters on simulated hosts (registered for the whole test tree by
tests/conftest.py's `pytest_plugins`).

`slurm_cluster` and `ray_cluster` are session-scoped: the daemons start once (Slurm in about a
second, Ray in about five) and serve every test that asks for them; each skips, saying why,
where it cannot run (not root, no `ip`, Slurm or munge not installed - `make system-packages`
installs them - or Ray not installed).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from tests.cluster.netns import HostNetwork
from tests.cluster.ray_cluster import RayCluster, auth_env, make_token, ray_unavailable
from tests.cluster.slurm import SlurmCluster, missing_binaries

HOSTS = 3
RAY_WORKER_HOSTS = 1  # the head on the gateway, one worker node on a host of its own
_ray_auth_dir = ""


def pytest_configure(config: pytest.Config) -> None:
    """Every Ray of the session - the test cluster, a Ray a launch starts for itself - uses
    one token of the session's (Ray reads its authentication settings once, at its import, so
    they are set before anything imports it; and nothing is written to ~/.ray)."""
    global _ray_auth_dir
    _ray_auth_dir = tempfile.mkdtemp(prefix="lp-ray-auth-")
    token_path = os.path.join(_ray_auth_dir, "auth_token")
    make_token(token_path)
    os.environ.update(auth_env(token_path))


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(_ray_auth_dir, ignore_errors=True)


_ENGINES = {"slurm_cluster": "slurm", "ray_cluster": "ray"}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks each test that runs a real engine with its name (`slurm`, `ray`, `kubernetes`),
    so that `pytest -m "not ray"` leaves those out; `make test` runs them all. A test is
    marked when it asks for an engine's cluster, runs under a launch type of that name (the
    `launch` fixtures' parameters), or tests the Kubernetes launcher."""
    for item in items:
        engines = {engine for fixture, engine in _ENGINES.items()
                   if fixture in getattr(item, "fixturenames", ())}
        callspec = getattr(item, "callspec", None)
        if callspec is not None:
            engines |= {v for v in callspec.params.values()
                        if isinstance(v, str) and v in _ENGINES.values()}
        if item.nodeid.startswith("tests/launch/kubernetes/"):
            engines.add("kubernetes")
        for engine in sorted(engines):
            item.add_marker(engine)


def namespaces_unavailable() -> str | None:
    """Why simulated hosts (network namespaces) cannot be made here, or None if they can."""
    if os.geteuid() != 0:
        return "the cluster tests need root (network namespaces, the engines' daemons)"
    if shutil.which("ip") is None:
        return "the cluster tests need `ip` (iproute2) for network namespaces"
    return None


def cluster_unavailable() -> str | None:
    """Why a Slurm cluster on network namespaces cannot run here, or None if it can."""
    reason = namespaces_unavailable()
    if reason:
        return reason
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


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    """A started Ray cluster: a head on the gateway and a worker node on a host of its own,
    stopped, leaving no process behind, at the end of the session."""
    reason = namespaces_unavailable() or ray_unavailable()
    if reason:
        pytest.skip(reason)
    with HostNetwork(RAY_WORKER_HOSTS) as network:
        with RayCluster(str(tmp_path_factory.mktemp("ray")), network,
                        os.environ["RAY_AUTH_TOKEN_PATH"]) as cluster:
            yield cluster
