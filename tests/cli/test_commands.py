"""`launchpad ls`, `status`, `logs` and `logs -f` against one real local_mp program, launched
with `launchpad launch` (tests/cli/serving.py) for the module's tests."""

from __future__ import annotations

import json
import re
import signal
import time

import pytest

from tests.cli import helpers
from tests.cli.helpers import cli, failed
from tests.processes import Script

pytestmark = pytest.mark.timeout(180)

NODES = ["echo/0", "main/0", "worker/0", "worker/1", "gate/0", "crasher/0"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> dict[str, str]:
    """The module's own run registry, as the environment the commands get."""
    return {"LAUNCHPAD_RUN_DIR": str(tmp_path_factory.mktemp("runs"))}


@pytest.fixture(scope="module")
def program(run_dir):
    """The serving program, its nodes up and its crasher waiting to be restarted; the
    launcher's Script and the run id."""
    script, run_id = helpers.launch_serving(**run_dir)
    try:
        helpers.wait_for_all(script, [r"\[main/0\] main is done", r"\[worker/0\] worker 0 ready",
                                      r"\[worker/1\] worker 1 ready", r"\[gate/0\] gate opened"])
        helpers.wait_until(lambda: _nodes(run_id, run_dir)["crasher/0"]["state"]
                           == "restarting", what="crasher/0 restarting")
    except BaseException:
        script.kill_session()
        raise
    yield script, run_id
    helpers.end_serving(script, run_id, **run_dir)


def _nodes(run_id: str, env: dict[str, str]) -> dict[str, dict]:
    result = cli("status", run_id, "--json", env=env)
    assert result.returncode == 0, result.stderr
    return {node["name"]: node for node in json.loads(result.stdout)["nodes"]}


def test_ls_lists_the_run_first_then_its_program_launch_type_and_start_time(program, run_dir):
    _, run_id = program
    result = cli("ls", env=run_dir)
    assert result.returncode == 0, result.stderr
    header, line = result.stdout.splitlines()
    assert header.split() == ["RUN", "PROGRAM", "LAUNCH", "TYPE", "STARTED"]
    fields = line.split()
    assert fields[:3] == [run_id, "serving", "local_mp"]
    started = time.mktime(time.strptime(" ".join(fields[3:]), "%Y-%m-%d %H:%M:%S"))
    assert abs(started - helpers.record_of(run_id, run_dir).started_at) < 1  # local time


def test_status_shows_every_node_and_the_failure_of_the_crasher(program, run_dir):
    script, run_id = program
    result = cli("status", env=run_dir)  # the only run: RUN may be left out
    assert result.returncode == 0, result.stderr
    title, header, *rows = result.stdout.splitlines()
    assert title == f"serving (local_mp, run {run_id}): running"
    assert header.split() == ["node", "kind", "state", "host", "pid", "restarts", "uptime",
                              "cpu", "memory", "calls/s", "errors", "p50", "p99"]
    table = {row.split()[0]: row.split() for row in rows[:len(NODES)]}
    assert list(table) == NODES
    for name in ("echo/0", "main/0", "worker/0", "worker/1"):
        assert table[name][2:4] == ["running", "127.0.0.1"], table[name]
        assert int(table[name][4]) > 0  # its pid
    assert table["echo/0"][1] == "CourierNode" and table["main/0"][1] == "PyNode"
    assert table["crasher/0"][2] == "restarting"
    assert rows[len(NODES):] == [
        "crasher/0: RuntimeError: crashed on purpose (restarted)"]


def test_status_as_json_is_the_controllers_whole_status(program, run_dir):
    _, run_id = program
    result = cli("status", run_id[:12], "--json", env=run_dir)  # a run id's beginning
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert (status["program"], status["launch_type"], status["run_id"], status["state"]) == (
        "serving", "local_mp", run_id, "running")
    nodes = {node["name"]: node for node in status["nodes"]}
    assert list(nodes) == NODES
    crasher = nodes["crasher/0"]
    assert crasher["restarts"] == 1 and "crashed on purpose" in crasher["failures"][0]["reason"]
    assert "in crash" in crasher["failures"][0]["traceback"]


def test_logs_prints_what_a_node_wrote(program, run_dir):
    _, run_id = program
    for args in (["main"], ["main/0"], [run_id, "main"]):
        result = cli("logs", *args, env=run_dir)
        assert result.returncode == 0, result.stderr
        assert result.stdout == "main says 0\nmain says 1\nmain says 2\nmain is done\n"
    result = cli("logs", "worker/1", env=run_dir)
    assert (result.returncode, result.stdout) == (0, "worker 1 ready\n"), result.stderr


def test_logs_of_a_node_that_printed_nothing_say_so(program, run_dir):
    result = cli("logs", "echo", env=run_dir)
    assert (result.returncode, result.stdout, result.stderr) == (
        0, "", "launchpad: node echo/0 has printed nothing yet\n")


def test_logs_of_a_group_of_several_needs_the_index(program, run_dir):
    assert failed(cli("logs", "worker", env=run_dir)) == (
        "launchpad: group 'worker' of program 'serving' has 2 nodes; name one: worker/0, "
        "worker/1")


@pytest.mark.parametrize("node", ["nope", "worker/7", "nope/0"])
def test_logs_of_a_node_the_program_does_not_have(program, run_dir, node):
    assert failed(cli("logs", node, env=run_dir)) == (
        f"launchpad: program 'serving' has no node {node!r}; its nodes: {', '.join(NODES)}")


def test_following_a_log_prints_what_comes_next_until_the_node_ends(program, run_dir):
    _, run_id = program
    follower = Script(["-m", "launchpad.cli", "logs", run_id, "gate", "-f"], env=run_dir,
                      timeout=helpers.TIMEOUT)
    try:
        follower.wait_for("^gate opened$")
        helpers.release_gate(helpers.record_of(run_id, run_dir))
        follower.wait_for("^gate closed$")  # written after the follow began
        assert follower.finish() == 0  # gate/0 ended: so does the follow
    finally:
        follower.kill()
    assert follower.output == "gate opened\ngate closed\n"
    assert _nodes(run_id, run_dir)["gate/0"]["state"] == "stopped"


def test_ctrl_c_ends_a_follow_quietly(program, run_dir):
    follower = Script(["-m", "launchpad.cli", "logs", "-f", "main"], env=run_dir,
                      timeout=helpers.TIMEOUT)
    try:
        follower.wait_for("^main is done$")
        follower.process.send_signal(signal.SIGINT)
        assert follower.finish() == 0
    finally:
        follower.kill()
    assert not re.search("Traceback|KeyboardInterrupt", follower.output), follower.output
