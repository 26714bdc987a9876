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
from tests.launch.helpers import TIMEOUT
from tests.launch.slurm.test_lost_host import Counter, _client, _kill_host, _until

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
        ray_of_two, tmp_path, no_leaked_threads):
    program = lp.Program("ray-lossy")
    state = lp.StatePolicy(every_secs=0.5, dir=str(tmp_path / "states"))
    with program.group("learner", state=state):
        program.add_node(lp.CourierNode(Counter))
    with program.group("actor", state=state, restart=lp.RestartPolicy(max_restarts=2)):
        for _ in range(2):
            program.add_node(lp.CourierNode(Counter))
    # One actor on each Ray node (SPREAD), the learner on the head (its `node:IP` resource).
    head = ray_of_two.node_addresses[0]
    controller = lp.launch(program, launch_type="ray", liveness_timeout_secs=5,
                           resources={"actor": lp.Resources(cpus=1),
                                      "learner": lp.Resources(extra={f"node:{head}": 0.01})},
                           ray=lp.RaySettings(placement={"actor": "SPREAD"}))
    try:
        names = ["learner/0", "actor/0", "actor/1"]
        for name in names:
            assert controller.wait_for_started(name, TIMEOUT), name
        worker_host = ray_of_two.network.hosts[0]
        hosts = controller.hosts()
        moving = [name for name in names if hosts[name] == worker_host.address]
        assert len(moving) == 1 and moving[0].startswith("actor"), hosts
        staying = [name for name in names if name not in moving]
        clients = {name: _client(program, name) for name in names}
        for name in names:
            assert [clients[name].tick() for _ in range(5)] == [1, 2, 3, 4, 5]
        for name in names:
            _until(lambda name=name: clients[name].last_saved() == 5, f"{name} saved")

        _kill_host(ray_of_two.network, worker_host)

        for name in moving:
            assert controller.wait_for_restarts(name, 1, 90), name
            assert controller.wait_for_started(name, 90), name
            assert controller.hosts()[name] != worker_host.address
            assert _client(program, name).tick() == 6  # its state, restored
        for name in staying:
            assert clients[name].tick() == 6  # never stopped
            assert controller.restarts().get(name, 0) == 0
        assert controller.failure is None
    finally:
        controller.stop()
        controller.wait(timeout=TIMEOUT, raise_error=False)
