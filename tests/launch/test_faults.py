"""The fault matrix's cells that no other test file covers (tests/FAULTS.md has the whole
matrix, fault x launcher): a handler that raises, a port taken before its node binds it, a
node that never comes up, a host cut off from the network, a detached program's controller
lost. Each runs under every launcher where the fault exists, and asserts the outcome: a named
NodeFailedError or a restart by policy, an error for that caller only, a bounded wait, and
nothing left running (the fixtures' leak checks)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess

import pytest

import launchpad as lp
from tests.cli.helpers import wait_until
from tests.cluster.netns import wait_gone
from tests.launch.conftest import CLUSTER_LAUNCH_TYPES
from tests.launch.helpers import TIMEOUT
from tests.processes import ROOT, live_descendants


def _run_forever() -> None:
    lp.wait_for_stop()


# --- a handler that raises ------------------------------------------------------------------

class Calculator:
    def divide(self, a, b):
        return a / b


def _divide_by_zero_then_not(calculator, box) -> None:
    try:
        calculator.divide(1, 0)
    except ZeroDivisionError as e:
        box.put(type(e).__name__)
    box.put(calculator.divide(9, 3))


def test_a_handler_error_reaches_only_its_caller_and_the_node_keeps_serving(launch_local,
                                                                            box):
    results = box()
    program = lp.Program("handler_error")
    handle = program.add_node(lp.CourierNode(Calculator), label="calculator")
    program.add_node(lp.PyNode(_divide_by_zero_then_not, handle, results), label="caller")
    controller = launch_local(program)
    assert (results.get(), results.get()) == ("ZeroDivisionError", 3)  # a caller node's
    client = handle.dereference()
    failing, fine = client.futures.divide(1, 0), client.futures.divide(6, 3)
    with pytest.raises(ZeroDivisionError, match="division by zero"):
        failing.result(TIMEOUT)
    assert fine.result(TIMEOUT) == 2 and client.divide(8, 2) == 4
    calculator = next(n for n in controller.status().nodes if n.name == "calculator/0")
    assert calculator.state == "running" and not calculator.failures
    controller.stop()
    assert controller.wait(timeout=TIMEOUT)  # raises if anything failed


# --- a port taken -----------------------------------------------------------------------------

class WebServer:
    """Serves on its allocated address. Its first run finds the port taken between the pick
    and its bind (as by another program of its host: here a socket of its own)."""

    def __init__(self, web, runs_file, box):
        self._web, self._runs_file, self._box = web, runs_file, box

    def run(self):
        port = lp.get_port_from_address(self._web.resolve())
        with open(self._runs_file, "a") as runs:
            runs.write("run\n")
        with open(self._runs_file) as runs:
            first = len(runs.read().split()) == 1
        squatter = socket.create_server(("", port)) if first else None
        try:
            server = socket.create_server(("", port))
        finally:
            if squatter is not None:
                squatter.close()
        with server:
            self._box.put(port)
            lp.wait_for_stop()


def test_a_port_taken_before_its_node_binds_it_fails_the_run_named_and_a_restart_takes_a_new(
        launch_local, box, tmp_path):
    ports = box()
    program = lp.Program("taken")
    server = lp.PyClassNode(WebServer)
    web = server.allocate_address("web")
    server.configure(web, str(tmp_path / "runs"), ports)
    with program.group("web", restart=lp.RestartPolicy(max_restarts=1, backoff_secs=0.01)):
        program.add_node(server)
    controller = launch_local(program)
    port = ports.get()  # bound by the second run
    assert controller.restarts() == {"web/0": 1}
    [node] = controller.status().nodes
    assert [f.restarted for f in node.failures] == [True]
    assert "Address already in use" in node.failures[0].reason
    # The port the restarted node picked is the one the program resolves.
    assert lp.get_port_from_address(web.resolve(timeout=TIMEOUT)) == port
    assert lp.get_port_from_address(node.addresses["web/0:web"]) == port
    controller.stop()
    assert controller.wait(timeout=TIMEOUT)


# --- a node that never comes up ---------------------------------------------------------------

@pytest.mark.parametrize("launch_failing", ["local_mp", "slurm"], indirect=True)
def test_a_node_whose_interpreter_hangs_at_start_up_fails_named_within_the_startup_timeout(
        launch_failing, tmp_path):
    hangs = tmp_path / "hangs"  # imported by the interpreter before anything of launchpad
    hangs.mkdir()
    (hangs / "sitecustomize.py").write_text("import threading\nthreading.Event().wait()\n")
    path = os.pathsep.join(p for p in (str(hangs), ROOT, os.environ.get("PYTHONPATH")) if p)
    program = lp.Program("never_up")
    with program.group("stuck", restart=lp.RestartPolicy(max_restarts=1, backoff_secs=0.01)):
        program.add_node(lp.PyNode(int))
    controller = launch_failing(program, startup_timeout_secs=1, local_resources={
        "stuck": lp.PythonProcess(env={"PYTHONPATH": path})})
    with pytest.raises(lp.NodeFailedError, match=r"failed \(after 1 restart\): did not start "
                                                 r"within startup_timeout_secs=1") as failed:
        controller.wait(timeout=TIMEOUT)
    assert failed.value.node == "stuck/0" and controller.restarts() == {"stuck/0": 1}
    assert controller.status().nodes[0].state == "failed"


@pytest.mark.parametrize("launch_failing", ["ray"], indirect=True)
def test_an_actor_whose_resources_never_free_fails_named_within_the_startup_timeout(
        launch_failing, ray_cluster):
    worker_node = ray_cluster.node_addresses[1]
    whole = lp.Resources(cpus=ray_cluster.cpus_per_node, extra={f"node:{worker_node}": 0.01})
    hog = lp.Program("hog")
    hog.add_node(lp.PyNode(_run_forever), label="hog")
    holding = launch_failing(hog, resources={"hog": whole})
    assert holding.wait_for_started("hog/0", TIMEOUT)
    starved = lp.Program("starved")  # it fits the Ray node, once the hog has gone
    starved.add_node(lp.PyNode(int), label="starved")
    controller = launch_failing(starved, resources={"starved": whole}, startup_timeout_secs=1)
    with pytest.raises(lp.NodeFailedError, match="did not start within "
                                                 "startup_timeout_secs=1") as failed:
        controller.wait(timeout=TIMEOUT)
    assert failed.value.node == "starved/0"
    assert not holding.wait(timeout=0)  # the other program runs on


# --- a host cut off ---------------------------------------------------------------------------

def _set_link(device: str, state: str) -> None:
    subprocess.run(["ip", "link", "set", device, state], check=True, timeout=30)


@pytest.mark.parametrize("launch_failing", CLUSTER_LAUNCH_TYPES, indirect=True)
def test_a_node_whose_host_is_cut_off_fails_named_and_ends_itself(launch_failing, request):
    cluster = request.getfixturevalue(f"{launch_failing.launch_type}_cluster")
    program = lp.Program("cut_off")
    program.add_node(lp.PyNode(_run_forever), label="worker")
    # Under ray: on the Ray node of a host of its own (the head shares this one's network).
    resources = ({"worker": lp.Resources(extra={f"node:{cluster.node_addresses[1]}": 0.01})}
                 if launch_failing.launch_type == "ray" else None)
    controller = launch_failing(program, liveness_timeout_secs=2, termination_notice_secs=0.5,
                                resources=resources)
    assert controller.wait_for_started("worker/0", TIMEOUT)
    host = next(h for h in cluster.network.hosts
                if h.address == controller.hosts()["worker/0"])
    pid = controller.node_pids()["worker/0"]
    _set_link(host.veth, "down")  # its link into the bridge: the host is unreachable
    try:
        assert controller.wait_for_node("worker/0", TIMEOUT)
        failure = controller.failure
        assert failure.node == "worker/0" and "no heartbeat for 2s" in failure.reason
        # Unable to reach its controller, the node stops and ends its process by itself.
        assert not wait_gone([pid], TIMEOUT), "the cut-off node did not end itself"
    finally:
        _set_link(host.veth, "up")
    with pytest.raises(lp.NodeFailedError, match="worker/0"):
        controller.wait(timeout=TIMEOUT)


# --- a detached program's controller lost -----------------------------------------------------

def _kill_slurm_controller(controller) -> None:
    """SIGKILLs the job's batch step (the controller: the batch script execs it)."""
    subprocess.run(["scancel", "--batch", "--signal=KILL", controller.job_id], check=True,
                   timeout=30)


def _kill_ray_controller(controller) -> None:
    """SIGKILLs the process of the controller's actor (Ray names it by the actor's class)."""
    titled = []
    for pid in live_descendants():
        with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as f:
            if f.read().startswith(b"ray::ControllerActor"):
                titled.append(pid)
    assert len(titled) == 1, f"the controller's actor process, of {titled}"
    os.kill(titled[0], signal.SIGKILL)


_LOST_CONTROLLER = {
    "slurm": (_kill_slurm_controller, "ended before its controller said how the program did"),
    "ray": (_kill_ray_controller, "is gone from the Ray cluster without saying how"),
}


@pytest.mark.parametrize("launch_type", CLUSTER_LAUNCH_TYPES)
def test_a_detached_program_whose_controller_dies_ends_and_attaching_says_so(
        launch_type, request, cluster_first, no_leaked_threads, no_leaked_processes,
        monkeypatch, tmp_path):
    for name, value in request.getfixturevalue(f"{launch_type}_cluster").env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LAUNCHPAD_RUN_DIR", str(tmp_path))  # where Ray runs are recorded
    program = lp.Program("orphaned")
    program.add_node(lp.PyNode(_run_forever), label="worker")
    controller = lp.launch(program, launch_type=launch_type, detach=True,
                           termination_notice_secs=1,
                           slurm=lp.SlurmSettings(run_dir=str(tmp_path)))
    kill, said = _LOST_CONTROLLER[launch_type]
    try:
        def running() -> bool:
            status = controller.status()
            return bool(status and status.nodes and status.nodes[0].state == "running")
        wait_until(running, TIMEOUT, "the worker running")
        pid = controller.status().nodes[0].pid
        kill(controller)
        with pytest.raises(lp.LaunchError, match=said):
            controller.wait(timeout=TIMEOUT)
        with pytest.raises(lp.LaunchError, match=said):  # and to any process that attaches
            lp.attach(controller.run_id, run_dir=str(tmp_path)).wait(timeout=TIMEOUT)
        assert not wait_gone([pid], TIMEOUT), "a node outlived its program's controller"
    finally:
        controller.kill()
