"""A signal of the launching process stops (then kills) its programs wherever its main thread
is when the signal comes: Python runs the handler in that thread between two bytecodes, here
inside the controller's own locked section, where a handler that stopped the program itself
would wait for a lock its own thread holds. Each case runs in a process of its own, whose
handlers no earlier test (a Ray driver takes SIGTERM) has touched. (Ctrl+C, SIGTERM and SIGHUP
as a user sends them are tested from outside too, in test_processes.py and
test_slurm_pending.py.)"""

import pathlib
import re
import signal
import subprocess
import sys

import pytest

from tests.launch.conftest import CLUSTER_LAUNCH_TYPES, NODE_PROCESS_LAUNCH_TYPES
from tests.launch.helpers import TIMEOUT
from tests.launch.launchers import run_launcher, wait_gone

ROOT = pathlib.Path(__file__).parents[3]


def _run(signal_name, times, kind):
    return subprocess.run([sys.executable, "-m", "tests.launch.runtime.signal_under_lock",
                           signal_name, str(times), kind], cwd=ROOT, capture_output=True,
                          text=True, timeout=2 * TIMEOUT)


@pytest.mark.usefixtures("no_leaked_processes")
@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_while_the_main_thread_holds_the_controllers_lock_stops_the_program(
        signal_name):
    result = _run(signal_name, 1, "polite")
    assert result.returncode == 0, result.stderr
    assert "ended by a stop" in result.stdout, result.stderr
    assert "launchpad: stopping polite" in result.stderr


@pytest.mark.usefixtures("no_leaked_processes")
def test_a_second_signal_under_the_controllers_lock_kills_a_node_that_ignores_the_stop():
    result = _run("SIGTERM", 2, "stubborn")
    assert result.returncode == 0, result.stderr
    assert "ended" in result.stdout, result.stderr
    assert "launchpad: killing the nodes of stubborn on SIGTERM" in result.stderr


@pytest.mark.parametrize("launch_type", NODE_PROCESS_LAUNCH_TYPES)
def test_a_sigterm_of_the_launcher_stops_its_program_gracefully(launch_type, request,
                                                                cluster_first,
                                                                no_leaked_processes,
                                                                monkeypatch):
    """Under ray too, whose `ray.init()` in the launcher takes SIGTERM for itself."""
    if launch_type in CLUSTER_LAUNCH_TYPES:  # the launcher finds the session's cluster
        for name, value in request.getfixturevalue(f"{launch_type}_cluster").env.items():
            monkeypatch.setenv(name, value)
    launcher, pids = run_launcher("polite", 60, launch_type)
    launcher.send_signal(signal.SIGTERM)
    out, _ = launcher.communicate(timeout=TIMEOUT)
    assert launcher.returncode == 0, out
    assert "launchpad: stopping polite on SIGTERM" in out and "Program stopped" in out, out
    assert wait_gone(pids, TIMEOUT)


@pytest.mark.usefixtures("no_leaked_processes")
def test_a_ray_launch_after_a_local_one_leaves_sigterm_to_launchpad(ray_cluster, monkeypatch):
    """ray.init() sets a SIGTERM handler that exits the process; the handlers were already
    launchpad's (the local launch took them), so the Ray launch takes SIGTERM back."""
    for name, value in ray_cluster.env.items():
        monkeypatch.setenv(name, value)
    launcher, pids = run_launcher("second", 60, "ray")
    launcher.send_signal(signal.SIGTERM)
    out, _ = launcher.communicate(timeout=TIMEOUT)
    assert launcher.returncode == 0, out
    said = re.search(r"launchpad: stopping (\S+), (\S+) on SIGTERM", out)
    assert said and {*said.groups()} == {"first", "second"}, out
    assert "Program stopped" in out, out
    assert wait_gone(pids, TIMEOUT)
