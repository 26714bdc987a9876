"""A Slurm host lost mid-run (every process of its namespace killed: its slurmd, the agent's
step, its nodes): the job goes on (`--no-kill`), the nodes of that host are restarted by their
group's policy on the other hosts, where the job holds room (slurm/node_hosts.py), with the
state their StatePolicy kept; the nodes elsewhere never notice. On a cluster of its own: the
session's stays whole for the other tests."""

from __future__ import annotations

import pytest

import launchpad as lp
from tests.cluster.fixtures import cluster_unavailable
from tests.cluster.netns import HostNetwork
from tests.cluster.slurm import SlurmCluster
from tests.launch import helpers, lost_hosts
from tests.launch.helpers import TIMEOUT

pytestmark = [pytest.mark.timeout(240), pytest.mark.slurm]


@pytest.fixture
def small_cluster(tmp_path_factory, monkeypatch):
    """A Slurm of 3 hosts of 2 CPUs each, for this test alone."""
    reason = cluster_unavailable()
    if reason:
        pytest.skip(reason)
    with HostNetwork(3) as network:
        with SlurmCluster(str(tmp_path_factory.mktemp("lost")), network,
                          cpus_per_host=2) as cluster:
            for name, value in cluster.env.items():
                monkeypatch.setenv(name, value)
            monkeypatch.setattr(helpers, "BOX_HOST", network.gateway)
            yield cluster


def test_the_nodes_of_a_lost_host_start_again_elsewhere_with_their_state(
        small_cluster, tmp_path, no_leaked_threads):
    launched = lost_hosts.program("lossy", actors=3)
    # 1 learner and 3 actors of 1 CPU, room for 5 actors: 3 hosts of 2 CPUs, 2 slots spare.
    controller = lp.launch(launched, launch_type="slurm", liveness_timeout_secs=3,
                           slurm=lp.SlurmSettings(run_dir=str(tmp_path),
                                                  max_nodes={"actor": 5}))
    try:
        clients = lost_hosts.ticked_and_saved(controller, launched)
        hosts = controller.hosts()
        # An actor's host, not the learner's, nor the first, where the job's batch step runs.
        doomed = next(host for host in small_cluster.network.hosts[1:]
                      if host.address != hosts["learner/0"]
                      and host.address in hosts.values())
        moved = lost_hosts.lose_host(controller, launched, clients, small_cluster.network,
                                     doomed)
        assert moved and all(name.startswith("actor/") for name in moved)
    finally:
        controller.stop()
        controller.wait(timeout=TIMEOUT, raise_error=False)
