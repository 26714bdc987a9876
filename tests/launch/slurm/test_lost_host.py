"""A Slurm host lost mid-run (every process of its namespace killed: its slurmd, the agent's
step, its nodes): the job goes on (`--no-kill`), the nodes of that host are restarted by their
group's policy on the other hosts, where the job holds room (slurm/node_hosts.py), with the
state their StatePolicy kept; the nodes elsewhere never notice. On a cluster of its own: the
session's stays whole for the other tests."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import launchpad as lp
from launchpad import context
from tests.cluster.fixtures import cluster_unavailable
from tests.cluster.netns import HostNetwork, wait_gone
from tests.cluster.slurm import SlurmCluster
from tests.launch import helpers
from tests.launch.helpers import TIMEOUT

pytestmark = [pytest.mark.timeout(240), pytest.mark.slurm]


class Counter:
    """Counts its ticks; the count is its state, saved every half second."""

    def __init__(self):
        self.count = 0
        self.saved = -1
        self._lock = threading.Lock()

    def tick(self) -> int:
        with self._lock:
            self.count += 1
            return self.count

    def last_saved(self) -> int:
        return self.saved

    def save_state(self) -> int:
        with self._lock:
            self.saved = self.count
            return self.count

    def restore_state(self, count: int) -> None:
        self.count = self.saved = count

    def index(self) -> int:
        return context.current().index


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


def _program() -> lp.Program:
    program = lp.Program("lossy")
    state = lp.StatePolicy(every_secs=0.5)
    with program.group("learner", state=state):
        program.add_node(lp.CourierNode(Counter))
    with program.group("actor", state=state, restart=lp.RestartPolicy(max_restarts=2)):
        for _ in range(3):
            program.add_node(lp.CourierNode(Counter))
    return program


def _until(condition, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, f"not within {TIMEOUT}s: {what}"
        time.sleep(0.1)  # polls a node's answer: the state store has no event to wait on


def _kill_host(network: HostNetwork, host) -> None:
    """Every process of `host`'s namespace killed at once, as a machine that dies."""
    while pids := network.pids(host):
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        wait_gone(pids, 5.0)


def _client(program, name):
    label, _, index = name.partition("/")
    return program.groups[label][int(index)].create_handle().dereference()


def test_the_nodes_of_a_lost_host_start_again_elsewhere_with_their_state(
        small_cluster, tmp_path, no_leaked_threads):
    program = _program()
    # 1 learner and 3 actors of 1 CPU, room for 5 actors: 3 hosts of 2 CPUs, 2 slots spare.
    controller = lp.launch(program, launch_type="slurm", liveness_timeout_secs=3,
                           slurm=lp.SlurmSettings(run_dir=str(tmp_path),
                                                  max_nodes={"actor": 5}))
    try:
        names = ["learner/0", "actor/0", "actor/1", "actor/2"]
        for name in names:
            assert controller.wait_for_started(name, TIMEOUT), name
        hosts = controller.hosts()
        # Not the first host, where the job's batch step runs.
        doomed = next(host for host in small_cluster.network.hosts[1:]
                      if host.address != hosts["learner/0"]
                      and any(hosts[name] == host.address for name in names[1:]))
        moving = [name for name in names[1:] if hosts[name] == doomed.address]
        clients = {name: _client(program, name) for name in names}
        for name in names:
            assert [clients[name].tick() for _ in range(5)] == [1, 2, 3, 4, 5]
        for name in names:
            _until(lambda name=name: clients[name].last_saved() == 5, f"{name} saved")

        _kill_host(small_cluster.network, doomed)

        for name in moving:
            assert controller.wait_for_restarts(name, 1, TIMEOUT), name
            assert controller.wait_for_started(name, TIMEOUT), name
            assert controller.hosts()[name] != doomed.address
            assert _client(program, name).tick() == 6  # its state, restored
        assert clients["learner/0"].tick() == 6  # never stopped
        assert controller.restarts().get("learner/0", 0) == 0
        assert controller.failure is None
    finally:
        controller.stop()
        controller.wait(timeout=TIMEOUT, raise_error=False)
