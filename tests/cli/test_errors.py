"""Each way a command can be wrong is one line on stderr, `launchpad: ...`, exit status 1,
and no traceback: no run, a run that is gone, several runs, a node whose output is kept
nowhere, a program function that raises, a script that is not there."""

from __future__ import annotations

import os

import pytest

from launchpad.launch.runtime import run_records
from tests.cli.helpers import cli, failed

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.usefixtures("run_dir", "no_leaked_processes", "no_leaked_threads")]


@pytest.mark.parametrize("command", [["status"], ["logs", "waiter"], ["stop"]])
def test_a_command_needing_a_run_when_none_runs(command, run_dir):
    assert failed(cli(*command)) == (f"launchpad: no program of this user runs (records "
                                     f"under {run_records.root(run_dir)})")


def test_ls_with_no_run_says_so(run_dir):
    result = cli("ls")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (f"launchpad: no program of this user runs (records under "
                             f"{run_records.root(run_dir)})\n")


def test_a_run_that_is_not_running(launch_here):
    running = launch_here("present")
    assert failed(cli("status", "absent-20250101-000000-abcdefgh")) == (
        "launchpad: no running program 'absent-20250101-000000-abcdefgh' of this user (it "
        f"has ended, or never ran); running: {running.run_id}")


def test_several_runs_need_one_named(launch_here):
    first, second = launch_here("twin"), launch_here("twin")
    ids = sorted([first.run_id, second.run_id])
    assert failed(cli("status")) == f"launchpad: 2 programs run; name one: {', '.join(ids)}"
    assert failed(cli("status", "twin-")) == (
        f"launchpad: 'twin-' names 2 runs: {', '.join(ids)}")
    listed = cli("ls").stdout.splitlines()[1:]
    assert [line.split()[0] for line in listed] == ids
    assert cli("status", second.run_id).stdout.startswith(f"twin (local_mt, run {second.run_id})")


def test_logs_of_a_local_mt_node_say_where_its_output_goes(launch_here):
    launch_here("threads")
    assert failed(cli("logs", "waiter")) == (
        "launchpad: Program 'threads' (local_mt) keeps no log of node waiter/0: its nodes write "
        f"to the output of the process that launched them (pid {os.getpid()} on "
        f"{os.uname().nodename})")


@pytest.mark.parametrize("target, message", [
    ("tests.cli.programs:broken", "tests.cli.programs:broken() raised ValueError: no program "
                                  "today"),
    ("tests.cli.programs:not_a_program", "tests.cli.programs:not_a_program() returned int, "
                                         "not a Program"),
    ("tests.cli.programs:absent", "module tests.cli.programs has no function 'absent'"),
    ("tests.cli.nowhere:make", "cannot import tests.cli.nowhere: No module named "
                               "'tests.cli.nowhere'"),
    ("tests.cli.unimportable:make", "cannot import tests.cli.unimportable: RuntimeError: "
                                    "this module refuses to be imported"),
])
def test_a_program_function_that_fails(target, message, tmp_path):
    result = cli("kubernetes-manifests", target, "-o", str(tmp_path / "out"), "--image", "x")
    assert failed(result) == f"launchpad: {message}"


def test_a_launch_script_that_is_not_there():
    assert failed(cli("launch", "tests/cli/nowhere.py", "--flag")) == (
        "launchpad: no launch script 'tests/cli/nowhere.py'")
