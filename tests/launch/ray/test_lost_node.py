"""A Ray node lost mid-run (every process of its host killed: its raylet, its workers, the
actors on it): Ray declares it dead, the actors' runs end (`RayNodeWorker`), their group's
policy restarts them as new actors, and Ray places those on the nodes left - a placed group's
bundles are rescheduled there by Ray - with the state their StatePolicy kept; the nodes
elsewhere never notice. On a Ray cluster of its own: the session's stays whole."""

from __future__ import annotations

import os

import pytest

import launchpad as lp
from tests.cluster.fixtures import namespaces_unavailable
from tests.cluster.netns import HostNetwork
from tests.cluster.ray_cluster import RayCluster, ray_unavailable
from tests.launch import lost_hosts
from tests.launch.helpers import TIMEOUT

pytestmark = [pytest.mark.timeout(300), pytest.mark.ray]

# Ray declares a node dead after its health checks fail for this long (its default is 30 s).
_HEALTH_ENV = {"RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "3"}


@pytest.fixture
def ray_of_two(tmp_path_factory, monkeypatch):
    """A Ray of a head and one worker node (4 CPUs each), for this test alone."""
    reason = namespaces_unavailable() or ray_unavailable()
    if reason:
        pytest.skip(reason)
    for name, value in _HEALTH_ENV.items():
        monkeypatch.setenv(name, value)
    with HostNetwork(1) as network:
        with RayCluster(str(tmp_path_factory.mktemp("ray-lost")), network,
                        os.environ["RAY_AUTH_TOKEN_PATH"]) as cluster:
            for name, value in cluster.env.items():
                monkeypatch.setenv(name, value)
            yield cluster


def test_actors_of_a_lost_ray_node_start_again_on_the_others_with_their_state(
        ray_of_two, no_leaked_threads):
    launched = lost_hosts.program("ray-lossy", actors=2)
    # One actor on each Ray node (SPREAD), the learner on the head (its `node:IP` resource).
    head = ray_of_two.node_addresses[0]
    controller = lp.launch(launched, launch_type="ray", liveness_timeout_secs=5,
                           resources={"actor": lp.Resources(cpus=1),
                                      "learner": lp.Resources(extra={f"node:{head}": 0.01})},
                           ray=lp.RaySettings(placement={"actor": "SPREAD"}))
    try:
        clients = lost_hosts.ticked_and_saved(controller, launched)
        moved = lost_hosts.lose_host(controller, launched, clients, ray_of_two.network,
                                     ray_of_two.network.hosts[0])
        assert len(moved) == 1 and moved[0].startswith("actor/")
    finally:
        controller.stop()
        controller.wait(timeout=TIMEOUT, raise_error=False)
