"""Dry runs (dry_run.py): a launch checks everything, prints what it would start and starts
nothing - given by `dry_run=True`, `--lp_dry_run` or `launchpad launch --dry-run`. Under slurm
the plan is the placement (each node's host slot) and the sbatch request, computed against
the real test Slurm, and nothing reaches its queue."""

from __future__ import annotations

import subprocess

import pytest

import launchpad as lp
from tests.cli.helpers import cli
from tests.processes import live_descendants

pytestmark = pytest.mark.usefixtures("no_leaked_processes", "no_leaked_threads")


def _program(name: str) -> lp.Program:
    program = lp.Program(name)
    with program.group("worker"):
        for _ in range(3):
            program.add_node(lp.PyNode(lp.wait_for_stop))
    program.add_node(lp.PyNode(lp.wait_for_stop), label="collector")
    return program


def test_a_local_dry_run_lists_the_nodes_and_starts_nothing(capsys):
    before = live_descendants()
    run = lp.launch(_program("planned"), launch_type="local_mp", dry_run=True)
    assert live_descendants() == before
    assert run.wait() is True and run.exit_codes() == {}
    out = capsys.readouterr()
    assert out.out.splitlines() == [
        "Program 'planned' under local_mp: 4 nodes, each a process of this host:",
        "  worker/0 (PyNode)", "  worker/1 (PyNode)", "  worker/2 (PyNode)",
        "  collector/0 (PyNode)"]
    assert "dry run of 'planned': nothing was started" in out.err


def test_a_dry_run_still_refuses_bad_input():
    with pytest.raises(ValueError, match=r"resources names groups \['learner'\]"):
        lp.launch(_program("refused"), launch_type="local_mp", dry_run=True,
                  resources={"learner": lp.Resources()})


def _queue() -> str:
    return subprocess.run(["squeue", "-h", "-o", "%j"], capture_output=True, text=True,
                          check=True).stdout


def test_a_slurm_dry_run_shows_each_nodes_host_slot_and_the_sbatch_request(
        slurm_cluster, monkeypatch, tmp_path):
    for name, value in slurm_cluster.env.items():
        monkeypatch.setenv(name, value)
    run = lp.launch(_program("placed"), launch_type="slurm", dry_run=True,
                    resources={"worker": lp.Resources(cpus=15)},
                    slurm=lp.SlurmSettings(run_dir=str(tmp_path), time_limit=30))
    lines = run.plan.splitlines()
    assert lines[:2] == ["Program 'placed' as one Slurm job on partition 'main':",
                         "  component 0: 3 hosts of 16 CPUs (groups worker, collector)"]
    assert sorted(lines[2:5]) == ["    host 0 (16/16 CPUs): worker/0 (15 CPUs), collector/0 "
                                  "(1 CPU)", "    host 1 (15/16 CPUs): worker/1 (15 CPUs)",
                                  "    host 2 (15/16 CPUs): worker/2 (15 CPUs)"]
    assert lines[5].startswith("  sbatch --parsable --job-name=lp-placed")
    assert "--time=30 --signal=USR1@60 --nodes=3 --ntasks-per-node=1 --cpus-per-task=16" in (
        lines[5])
    assert "lp-placed" not in _queue()


def test_launchpad_launch_dry_run_gives_the_script_the_flag(slurm_cluster, monkeypatch,
                                                           tmp_path):
    for name, value in slurm_cluster.env.items():
        monkeypatch.setenv(name, value)
    result = cli("launch", "--dry-run", "tests/launch/slurm/waiting.py", "cli-planned",
                 str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "Program 'cli-planned' as one Slurm job on partition 'main':" in result.stdout
    assert "  component 0: 1 host of 1 CPU (groups waiter)" in result.stdout
    assert "ended" in result.stdout  # the script ran to its end: wait() returned at once
    assert "nothing was started" in result.stderr
    assert "cli-planned" not in _queue()
