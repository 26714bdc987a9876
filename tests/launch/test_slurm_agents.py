"""Host agents under the real test Slurm (host_agent.py, slurm_agents.py): one srun step per
host, from which that host's nodes are forked, and the agent's own faults - the agent killed,
a node killed under its agent (restarted by its group's policy through the agent) - each
ending named. A node frozen on its host (its heartbeats stop) is test_slurm.py's."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

import launchpad as lp
from tests.cli.helpers import wait_until
from tests.launch.helpers import TIMEOUT
from tests.processes import live_descendants


def _forever() -> None:
    lp.wait_for_stop()


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace").split("\0")
    except OSError:
        return []


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _steps(name: str) -> list[str]:
    jobs = subprocess.run(["squeue", "-h", "-n", f"lp-{name}", "-o", "%i"],
                          capture_output=True, text=True, check=True).stdout.split()
    out = subprocess.run(["squeue", "-h", "-s", "-j", jobs[0], "-o", "%j"],
                         capture_output=True, text=True, check=True).stdout
    return sorted(out.split())


def _agent_pids(run_dir) -> list[int]:
    """The agents (not their sruns) whose spec is under `run_dir`, wherever they run."""
    return [int(pid) for pid in os.listdir("/proc") if pid.isdigit()
            and "--agent" in (argv := _cmdline(int(pid))) and argv[0] != "srun"
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
    sruns = [pid for pid in live_descendants() if _cmdline(pid)[:1] == ["srun"]
             and _cmdline(_parent(pid))[:1] != ["srun"]]  # (srun forks a helper of its own)
    assert len(sruns) == 3, [_cmdline(pid) for pid in sruns]  # one per host, none per node
    assert len(set(controller.hosts().values())) == 3
    controller.stop()
    assert controller.wait(TIMEOUT)


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
    assert controller.wait(TIMEOUT)


def test_a_node_killed_under_its_agent_is_restarted_through_it(slurm):
    program = lp.Program("rekilled")
    with program.group("worker", restart=lp.RestartPolicy(max_restarts=1, backoff_secs=0)):
        program.add_node(lp.PyNode(_forever))
    controller = slurm(program)
    assert controller.wait_for_started("worker/0", TIMEOUT)
    first = controller.node_pids()["worker/0"]
    os.kill(first, signal.SIGKILL)
    assert controller.wait_for_restarts("worker/0", 1, TIMEOUT)
    assert controller.wait_for_started("worker/0", TIMEOUT)
    wait_until(lambda: controller.node_pids().get("worker/0") not in (None, first),
               TIMEOUT, "the restarted node reports its new process")
    (failure,) = next(n for n in controller.status().nodes if n.name == "worker/0").failures
    assert "killed by signal SIGKILL" in failure.reason and failure.restarted
    controller.stop()
    assert controller.wait(TIMEOUT)


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
        controller.wait(TIMEOUT)
    assert "killed by signal SIGKILL" in failed.value.reason
    wait_until(lambda: not [pid for pid in nodes if os.path.exists(f"/proc/{pid}")
                            and _cmdline(pid)], TIMEOUT, "the agent's nodes are gone")
