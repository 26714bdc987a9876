"""Host agents under the real test Slurm (host_agent.py, slurm/agents.py): one srun step per
host, from which that host's nodes are forked, its nodes kept alive by its reports, and the
agent killed, ending its nodes named. A node killed under its agent and restarted through it
is test_processes.py's; a node frozen on its host (its heartbeats stop) is test_slurm.py's."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

import launchpad as lp
from tests.cli.helpers import wait_until
from tests.cluster.slurm import srun_clients
from tests.launch.helpers import TIMEOUT
from tests.processes import command_line


def _forever() -> None:
    lp.wait_for_stop()


def _steps(name: str) -> list[str]:
    jobs = subprocess.run(["squeue", "-h", "-n", f"lp-{name}", "-o", "%i"],
                          capture_output=True, text=True, check=True).stdout.split()
    out = subprocess.run(["squeue", "-h", "-s", "-j", jobs[0], "-o", "%j"],
                         capture_output=True, text=True, check=True).stdout
    return sorted(out.split())


def _agent_pids(run_dir) -> list[int]:
    """The agents (not their sruns) whose spec is under `run_dir`, wherever they run."""
    return [int(pid) for pid in os.listdir("/proc") if pid.isdigit()
            and "--agent" in (argv := command_line(int(pid))) and argv[0] != "srun"
            and str(run_dir) in argv[-2]]


def test_the_nodes_of_each_host_run_under_one_step_and_one_srun(slurm, tmp_path):
    program = lp.Program("agents")
    with program.group("worker"):
        for _ in range(3):
            program.add_node(lp.PyNode(_forever))
    with program.group("actor"):
        for _ in range(6):
            program.add_node(lp.PyNode(_forever))
    controller = slurm(program, resources={"worker": lp.Resources(cpus=14)},
                       slurm=lp.SlurmSettings(run_dir=str(tmp_path)))
    for name in [f"worker/{i}" for i in range(3)] + [f"actor/{i}" for i in range(6)]:
        assert controller.wait_for_started(name, TIMEOUT), name
    assert _steps("agents") == ["batch", "lp-agent-0.0", "lp-agent-0.1", "lp-agent-0.2"]
    sruns = srun_clients()
    assert len(sruns) == 3, [command_line(pid) for pid in sruns]  # one per host, none per node
    assert len(set(controller.hosts().values())) == 3
    controller.stop()
    assert controller.wait(timeout=TIMEOUT)


def test_nodes_live_past_the_liveness_timeout_on_their_agents_reports(slurm):
    """The agent sends one `reports` call per period for nodes that all sent a sample, and
    no `heartbeats`: each report keeps its run alive."""
    program = lp.Program("alive")
    program.add_node(lp.PyNode(_forever), label="worker")
    controller = slurm(program, liveness_timeout_secs=3)
    assert controller.wait_for_started("worker/0", TIMEOUT)
    assert controller.wait(timeout=8) is False  # over twice the timeout: still running
    assert not controller.failure
    controller.stop()
    assert controller.wait(timeout=TIMEOUT)


def test_an_agent_killed_fails_its_nodes_named_and_leaves_none_running(slurm, tmp_path):
    program = lp.Program("orphaned")
    with program.group("worker"):
        for _ in range(2):
            program.add_node(lp.PyNode(_forever))
    controller = slurm(program, slurm=lp.SlurmSettings(run_dir=str(tmp_path)))
    for name in ("worker/0", "worker/1"):
        assert controller.wait_for_started(name, TIMEOUT)
    nodes = list(controller.node_pids().values())
    (agent,) = _agent_pids(tmp_path)
    os.kill(agent, signal.SIGKILL)
    with pytest.raises(lp.NodeFailedError, match=r"worker/\d") as failed:
        controller.wait(timeout=TIMEOUT)
    assert "killed by signal SIGKILL" in failed.value.reason
    wait_until(lambda: not [pid for pid in nodes if os.path.exists(f"/proc/{pid}")
                            and command_line(pid)], TIMEOUT, "the agent's nodes are gone")
