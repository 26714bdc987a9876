"""Runs every example as its users do (`python -m examples.X.launch`) and checks its output.

Each example runs in its own subprocess, from the repository root, under local_mt and under
local_mp: that tests
the real entry point (absl flag parsing, --lp_launch_type read at launch time, app.run) and
that the program stops by itself. `subprocess.run(timeout=...)` kills an example that hangs.
"""

from __future__ import annotations

import importlib
import os
import pathlib
import subprocess
import sys

import cloudpickle
import pytest

from tests.stacks import needs_reverb

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
TIMEOUT_SECS = 60

CASES = [
    pytest.param("hello_world", [], ["client got: Hello, world!", "Program stopped cleanly."],
                 id="hello_world"),
    pytest.param("hello_world", ["--name=Launchpad"], ["client got: Hello, Launchpad!"],
                 id="hello_world-name"),
    pytest.param("consumer_producers", [],
                 ["Consumer: 4 producers squared 0..3 -> [0, 1, 4, 9]; sum = 14",
                  "Program stopped cleanly."],
                 id="consumer_producers"),
    pytest.param("consumer_producers", ["--num_producers=3"],
                 ["Consumer: 3 producers squared 0..2 -> [0, 1, 4]; sum = 5",
                  "Program stopped cleanly."],
                 id="consumer_producers-3"),
    pytest.param("batching", [],
                 [*(f"client {i}: made 8 calls, every answer correct" for i in range(4)),
                  "Server answered 32 calls in ",
                  "Program stopped cleanly."],
                 id="batching"),
    pytest.param("program_wait", [],
                 ["worker 0: 9592 primes in [0, 100000)",
                  "worker 1: 8392 primes in [100000, 200000)",
                  "worker 2: 8013 primes in [200000, 300000)",
                  "controller.wait() returned True: all 3 workers returned"],
                 id="program_wait"),
    # (Not the actors' own lines: the learner stops the program once it has read the last
    # trajectory, which may be before its actor, its writes flushed, has printed. That the
    # learner read 16 = 2 x 8, every one intact, says both actors wrote all of theirs.)
    pytest.param("replay", [],
                 ["learner: read 16 trajectories in 4 batches, every one intact",
                  "Program stopped cleanly."],
                 id="replay", marks=needs_reverb),
    pytest.param("agent", [],
                 ["learner: after 300 steps the greedy policy reaches the goal", "actor 0: ",
                  "actor 1: ",
                  "Program stopped cleanly."],
                 id="agent", marks=needs_reverb),
]


def run_example(name: str, args: list[str], launch_type: str = "local_mt",
                timeout: float = TIMEOUT_SECS,
                env: dict[str, str] | None = None,
                unset: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Runs examples/<name>/launch.py as a module (with `env` added to the environment, the
    variables `unset` left out); kills it on timeout."""
    environment = {k: v for k, v in {**os.environ, **(env or {})}.items() if k not in unset}
    return subprocess.run(
        [sys.executable, "-m", f"examples.{name}.launch", f"--lp_launch_type={launch_type}",
         *args],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout, check=False,
        env=environment)


@pytest.mark.parametrize("launch_type", ["local_mt", "local_mp"])
@pytest.mark.parametrize("name, args, expected", CASES)
def test_example_runs_and_prints(name: str, args: list[str], expected: list[str],
                                 launch_type: str):
    result = run_example(name, args, launch_type)
    report = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0, report
    for text in expected:
        assert text in result.stdout, f"{text!r} not in the output of {name}\n{report}"
    if launch_type == "local_mp":  # the first line is a node's: printed by its own process,
        line = next(line for line in result.stdout.splitlines() if expected[0] in line)
        assert line.startswith("["), report  # which the terminal prefixes with [label/index]


@pytest.mark.usefixtures("no_leaked_processes")
def test_consumer_producers_runs_unchanged_on_slurm(slurm_cluster, tmp_path):
    """The example, unchanged, as one Slurm job on the test cluster's hosts (its run folder
    under the HOME given, as it would be under a user's home on a cluster)."""
    result = run_example("consumer_producers", [], "slurm",
                         env={**slurm_cluster.env, "HOME": str(tmp_path)},
                         unset=("LAUNCHPAD_RUN_DIR",))
    report = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0, report
    assert "Consumer: 4 producers squared 0..3 -> [0, 1, 4, 9]; sum = 14" in result.stdout, (
        report)
    assert list(tmp_path.glob(".launchpad/launchpad-runs-*/consumer_producers-*")), report


def test_batching_runs_full_batches():
    """With the defaults every batch fills (32 calls, batch_size 8), so batching happened."""
    result = run_example("batching", [])
    assert result.returncode == 0, result.stderr
    assert "Server answered 32 calls in 4 batches: average batch size 8.0" in result.stdout, (
        result.stdout)


@pytest.mark.parametrize("name", ["hello_world", "consumer_producers", "batching",
                                  "program_wait"])
def test_make_program_nodes_pickle(name: str):
    """Every node of each example survives pickling, as process launchers will need."""
    program = importlib.import_module(f"examples.{name}.launch").make_program()
    nodes = program.get_all_nodes()
    assert nodes
    for node in nodes:
        cloudpickle.loads(cloudpickle.dumps(node))
