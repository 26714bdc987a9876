"""The end of a launching script, as Launchpad's users write it (`main()` returns right after
`lp.launch`): local programs keep running until they stop, Ctrl+C still stops (twice kills),
test_mt without a test case is stopped in order, a failure gives exit status 1, and nothing
prints noise on the way out."""

from __future__ import annotations

import os
import pickle
import select
import signal
import socket
import subprocess
import sys

import pytest

from tests.processes import ROOT, Script, live_descendants

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("no_leaked_processes")]
TIMEOUT = 60
NOISE = ("Traceback", "cannot schedule new futures", "Exception ignored")


def _script(kind: str, launch_type: str) -> Script:
    return Script(["-m", "tests.launch.runtime.exit_scripts", kind, launch_type], timeout=TIMEOUT)


@pytest.mark.parametrize("launch_type", ["local_mt", "local_mp"])
def test_the_program_outlives_main_and_ctrl_c_stops_it_cleanly(launch_type):
    script = _script("returns", launch_type)
    script.wait_for("main returned")
    script.wait_for("waiting for returns to stop")
    assert script.process.poll() is None  # main has returned; the program still runs
    script.process.send_signal(signal.SIGINT)
    assert script.finish() == 0, script.output
    assert "node stopped cleanly" in script.output  # it ran until the stop, and ended well
    assert not [n for n in NOISE if n in script.output], script.output


def test_a_second_ctrl_c_at_exit_kills_a_node_that_ignores_the_stop():
    script = _script("stubborn", "local_mp")
    script.wait_for("waiting for stubborn to stop")
    script.process.send_signal(signal.SIGINT)
    script.wait_for("launchpad: stopping")
    script.process.send_signal(signal.SIGINT)  # long before the 60 s grace period ends
    assert script.finish() == 0, script.output
    assert "killing the nodes" in script.output


@pytest.mark.parametrize("launch_type", ["local_mt", "local_mp"])
def test_a_script_that_waits_by_itself_is_unaffected(launch_type):
    script = _script("waits", launch_type)
    assert script.finish() == 0, script.output
    assert "main returned" in script.output
    assert "waiting for" not in script.output


@pytest.mark.parametrize("launch_type", ["local_mt", "local_mp"])
def test_a_program_failing_after_main_returned_gives_exit_status_1(launch_type):
    script = _script("fails", launch_type)
    assert script.finish() == 1, script.output
    assert "launchpad: Node fails/0 of program 'fails' failed; its traceback" in script.output
    assert script.output.count("RuntimeError: the node broke") == 1, script.output
    assert "atexit ran" in script.output  # the script's own exit handlers still ran


def test_test_mt_without_a_test_case_runs_and_is_stopped_at_exit():
    script = _script("handle", "test_mt")
    assert script.finish() == 0, script.output
    assert "hello test" in script.output  # the handle worked: the program ran
    assert "greeter stopped" in script.output  # stopped in order at exit, stop handlers run
    assert "waiting for" not in script.output  # not waited for: stopped
    assert not [n for n in NOISE if n in script.output], script.output


def test_the_fork_server_ends_quietly_when_its_launcher_goes_with_reports_unread(tmp_path):
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    server = subprocess.Popen(
        [sys.executable, "-c", "from launchpad.launch.node_process.fork_server import main; main()",
         "--fd", str(theirs.fileno())], pass_fds=[theirs.fileno()], cwd=ROOT,
        stderr=subprocess.PIPE, text=True)
    theirs.close()
    null = os.open(os.devnull, os.O_RDWR)
    # A node whose spec is missing: it starts, fails at once and ends; the server reports
    # both, and the launcher goes without reading either (Linux then resets the socket).
    request = pickle.dumps((0, str(tmp_path / "missing.spec"), True))
    socket.send_fds(ours, [request], [null, null, null])
    os.close(null)
    assert select.select([ours], [], [], TIMEOUT)[0], "the fork server reported nothing"
    ours.close()
    _, errors = server.communicate(timeout=TIMEOUT)
    assert server.returncode == 0, errors
    assert "Traceback" not in errors
    assert not live_descendants() & {server.pid}
