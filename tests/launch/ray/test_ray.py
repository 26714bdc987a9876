"""launch_type="ray" on a real Ray cluster: a head on the gateway and a worker node on a
simulated host of its own (tests/cluster). What only Ray shows - nodes on both Ray nodes
calling each other across them, lp.Resources and placement groups as Ray places them, an
actor killed or frozen (named failure, then restart by the group's policy), the Ray a launch
joins left running and the Ray it starts stopped - and bad input refused before any actor is
made. The programs every launch type runs (tests/launch/test_*.py) run under ray too, through
the `launch` fixtures."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

import launchpad as lp
from launchpad.launch.ray import placement as ray_placement
from tests.cli.helpers import cli
from tests.launch import helpers
from tests.launch.helpers import TIMEOUT
from tests.processes import ROOT


class Server:
    def ping(self) -> str:
        return "pong"


def _run_forever() -> None:
    lp.wait_for_stop()


def _call_and_report(server, box) -> None:
    box.put((server.ping(), server.address if hasattr(server, "address") else None))


def _on_node(address: str) -> lp.Resources:
    """Needs that only the Ray node at `address` has (Ray's own `node:IP` resource)."""
    return lp.Resources(extra={f"node:{address}": 0.01})


def _placements(controller) -> dict[str, str]:
    """Node name -> the address of the host it runs on."""
    return controller.hosts()


def test_nodes_run_on_both_ray_nodes_and_call_each_other_across_them(ray_launch, box,
                                                                     ray_cluster):
    head, worker = ray_cluster.node_addresses
    results = box()
    program = lp.Program("across")
    server = program.add_node(lp.CourierNode(Server), label="server")
    program.add_node(lp.PyNode(_call_and_report, server, results), label="client")
    controller = ray_launch(program, resources={"server": _on_node(worker),
                                                "client": _on_node(head)})
    assert results.get()[0] == "pong"
    assert _placements(controller) == {"server/0": worker, "client/0": head}
    controller.stop()
    assert controller.wait(timeout=TIMEOUT)


def test_a_spread_group_lands_on_different_ray_nodes(ray_launch, ray_cluster):
    program = lp.Program("spread")
    with program.group("server"):
        for _ in range(2):
            program.add_node(lp.CourierNode(Server))
    controller = ray_launch(program, resources={"server": lp.Resources(cpus=1)},
                            ray=lp.RaySettings(placement={"server": "STRICT_SPREAD"}))
    for name in ("server/0", "server/1"):
        assert controller.wait_for_started(name, TIMEOUT)
    assert set(_placements(controller).values()) == set(ray_cluster.node_addresses)


def test_a_placement_the_cluster_cannot_meet_fails_the_launch_named(ray_launch):
    program = lp.Program("crowded")
    with program.group("server"):
        for _ in range(3):  # three bundles, strictly apart, on two Ray nodes
            program.add_node(lp.CourierNode(Server))
    with pytest.raises(lp.LaunchError,
                       match="no room for 3 nodes of group 'server'.*STRICT_SPREAD"):
        ray_launch(program, resources={"server": lp.Resources(cpus=1)},
                   ray=lp.RaySettings(placement={"server": "STRICT_SPREAD"},
                                      placement_timeout_secs=2))


def test_needs_no_ray_node_has_are_refused_named(ray_launch):
    program = lp.Program("greedy")
    program.add_node(lp.PyNode(_run_forever), label="learner")
    with pytest.raises(lp.LaunchError, match="Group 'learner'.*'CPU': 64.*no node"):
        ray_launch(program, resources={"learner": lp.Resources(cpus=64)})


def test_a_frozen_actor_is_lost_within_the_liveness_timeout(ray_launch):
    program = lp.Program("frozen")
    program.add_node(lp.PyNode(_run_forever), label="worker")
    controller = ray_launch(program, liveness_timeout_secs=3)
    assert controller.wait_for_started("worker/0", TIMEOUT)
    os.kill(controller.node_pids()["worker/0"], signal.SIGSTOP)  # as on a lost Ray node
    with pytest.raises(lp.NodeFailedError, match="no heartbeat for 3s") as failed:
        controller.wait(timeout=TIMEOUT)
    assert failed.value.node == "worker/0"


def test_a_joined_cluster_and_the_users_own_connection_are_left_as_they_were(
        ray_launch, ray_cluster):
    import ray
    ray.init(address=ray_cluster.address, logging_level="error")
    try:
        program = lp.Program("guest")
        program.add_node(lp.PyNode(int), label="worker")
        assert ray_launch(program).wait(timeout=TIMEOUT)
        assert ray.is_initialized()  # the user's connection is theirs to close
        assert not [a for a in ray.util.list_named_actors(all_namespaces=True)]
    finally:
        ray.shutdown()
    assert sorted(ray_cluster.alive_nodes()) == sorted(ray_cluster.node_addresses)


def test_a_ray_started_for_the_launch_is_stopped_with_it(monkeypatch, no_leaked_threads,
                                                         no_leaked_processes, box):
    ray = pytest.importorskip("ray", reason="Ray is not installed (the `ray` extra)")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    results = box()
    program = lp.Program("own")
    server = program.add_node(lp.CourierNode(Server), label="server")
    program.add_node(lp.PyNode(_call_and_report, server, results), label="client")
    controller = lp.launch(program, launch_type="ray")
    assert results.get()[0] == "pong"
    controller.stop()
    assert controller.wait(timeout=TIMEOUT)
    assert not ray.is_initialized()  # and no_leaked_processes: its processes are gone


def test_resources_become_the_actors_options():
    assert ray_placement.ray_options(None) == {"num_cpus": 0}
    assert ray_placement.ray_options(lp.Resources(cpus=4, gpus=1, memory_mb=1024,
                                                 extra={"tpu": 2})) == {
        "num_cpus": 4, "num_gpus": 1, "memory": 1024 * 2**20, "resources": {"tpu": 2}}


@pytest.mark.parametrize("options, error, message", [
    ({"ray": object()}, TypeError, "ray must be an lp.RaySettings"),
    ({"terminal": "tmux_session"}, ValueError, "not available under ray"),
    ({"local_resources": {"worker": lp.PythonProcess(interpreter="/usr/bin/python3")}},
     TypeError, r"local_resources\['worker'\] under ray"),
    ({"ray": lp.RaySettings(placement={"ghost": "PACK"})}, ValueError,
     r"placement names groups \['ghost'\]"),
    ({"ray": lp.RaySettings(placement={"worker": "PACK"})}, ValueError,
     r"placement\['worker'\] needs resources="),
    ({"resources": {"worker": lp.Resources(extra={"tpu": "v4"})}}, ValueError,
     r"resources\['worker'\].extra\['tpu'\] under ray"),
])
def test_bad_ray_options_are_named_before_any_actor_is_made(ray_launch, options, error,
                                                            message):
    program = lp.Program("bad")
    program.add_node(lp.PyNode(int), label="worker")
    with pytest.raises(error, match=message):
        ray_launch(program, **options)


def test_the_ray_address_flag_gives_the_settings(monkeypatch):
    from launchpad.launch import launchers
    from launchpad.launch import options as launch_options
    monkeypatch.setattr(sys, "argv", ["launch.py", "--lp_ray_address=head:6379"])
    ray = launchers.get("ray")
    assert launch_options.resolve(ray, 1).settings == lp.RaySettings(address="head:6379")
    given = lp.RaySettings(address="other:6379")
    assert launch_options.resolve(ray, 1, engine_settings={"ray": given}).settings is given


def test_bad_ray_settings_are_named():
    with pytest.raises(ValueError, match=r"placement\['actor'\] must be one of PACK"):
        lp.RaySettings(placement={"actor": "DIAGONAL"})
    with pytest.raises(TypeError, match="runtime_env must be a dict"):
        lp.RaySettings(runtime_env="pip")


_LAUNCH_AND_LEAVE = """
import sys
import launchpad as lp
from tests.launch.helpers import BoxClient

def work(box):
    box.put("running")
    lp.wait_for_stop()

program = lp.Program("left-running")
program.add_node(lp.PyNode(work, BoxClient(sys.argv[1])), label="worker")
controller = lp.launch(program, launch_type="ray", detach=True)
print(controller.run_id, flush=True)
"""


def _launch_and_leave(box_address: str) -> str:
    """Launches a detached program from a process of its own, which then exits; its run id."""
    launched = subprocess.run([sys.executable, "-c", _LAUNCH_AND_LEAVE, box_address],
                              capture_output=True, text=True, timeout=TIMEOUT, check=True,
                              cwd=ROOT)
    return launched.stdout.split()[-1]


@pytest.fixture
def on_the_cluster(ray_cluster, monkeypatch, tmp_path):
    """This process and its children reach the test cluster; runs are recorded in tmp_path."""
    for name, value in ray_cluster.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LAUNCHPAD_RUN_DIR", str(tmp_path / ".launchpad"))
    monkeypatch.setattr(helpers, "BOX_HOST", ray_cluster.network.gateway)
    return ray_cluster


def test_a_detached_program_outlives_its_launcher_and_another_process_attaches_and_stops_it(
        on_the_cluster, no_leaked_threads, no_leaked_processes, box):
    running = box()
    run_id = _launch_and_leave(running.address)
    assert running.get() == "running"  # the launcher has gone; its program runs on
    with pytest.raises(lp.LaunchError, match="No run 'no-such-run'"):
        lp.attach("no-such-run")
    controller = lp.attach(run_id)
    assert controller.program_name == "left-running"
    assert controller.exit_codes() == {"worker/0": None}  # asked of the running controller
    listed = cli("ls").stdout.splitlines()[1].split()  # the command finds it too
    assert listed[:4] == [run_id, "left-running", "ray", "(detached)"]
    status = cli("status", run_id).stdout
    assert status.startswith(f"left-running (ray, run {run_id}): running"), status
    assert not controller.wait(timeout=0.5)
    controller.stop()
    assert controller.wait(timeout=TIMEOUT)
    assert controller.exit_codes() == {"worker/0": 0}
    assert on_the_cluster.named_actors() == []  # the controller's actor is gone too


def _fail() -> None:
    raise RuntimeError("detached and broken")


def test_a_node_failing_in_a_detached_program_is_named_with_its_traceback(
        on_the_cluster, no_leaked_threads, no_leaked_processes):
    program = lp.Program("broken")
    program.add_node(lp.PyNode(_fail), label="worker")
    controller = lp.launch(program, launch_type="ray", detach=True)
    with pytest.raises(lp.NodeFailedError, match="detached and broken") as failed:
        controller.wait(timeout=TIMEOUT)
    assert failed.value.node == "worker/0" and "_fail" in failed.value.node_traceback
    assert on_the_cluster.named_actors() == []


def test_killing_a_detached_program_ends_its_controller_and_nodes(
        on_the_cluster, no_leaked_threads, no_leaked_processes):
    program = lp.Program("doomed")
    program.add_node(lp.PyNode(_run_forever), label="worker")
    controller = lp.launch(program, launch_type="ray", detach=True)
    assert controller.exit_codes() == {"worker/0": None}
    assert [node.name for node in controller.status().nodes] == ["worker/0"]
    controller.kill()
    assert controller.wait(timeout=TIMEOUT) and controller.stop_reason.startswith("killed")
    assert controller.status() is None
    assert on_the_cluster.named_actors() == []  # and no_leaked_processes: the nodes' too


def test_a_detached_launch_that_fails_leaves_no_run_behind(
        on_the_cluster, tmp_path, no_leaked_threads, no_leaked_processes):
    program = lp.Program("unplaceable")
    program.add_node(lp.PyNode(_run_forever), label="learner")
    with pytest.raises(lp.LaunchError, match="Group 'learner'.*no node"):
        lp.launch(program, launch_type="ray", detach=True,
                  resources={"learner": lp.Resources(cpus=64)})
    assert not list((tmp_path / ".launchpad").glob("launchpad-runs-*/*"))  # no record
    assert on_the_cluster.named_actors() == []  # nor its controller's actor
