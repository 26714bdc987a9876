"""`launchpad stop`: the program stops, its record goes, a follow of its log ends with it."""

from __future__ import annotations

import os
import re

import pytest

from launchpad.launch.runtime import run_records
from tests.cli import helpers
from tests.cli.helpers import cli, failed
from tests.processes import Script

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("no_leaked_processes")]


def test_stop_stops_the_program_and_its_record_goes(run_dir):
    script, run_id = helpers.launch_serving()
    follower = None
    try:
        helpers.wait_for_all(script, [r"\[main/0\] main is done"])
        folder = helpers.record_of(run_id).folder
        follower = Script(["-m", "launchpad.cli", "logs", "-f", run_id, "main"],
                          timeout=helpers.TIMEOUT)
        follower.wait_for("^main is done$")
        result = cli("stop", run_id)
        assert (result.returncode, result.stderr) == (0, "")
        assert result.stdout == f"launchpad: stopped run {run_id} (program serving)\n"
        assert not os.path.exists(folder)  # gone before stop returned
        assert follower.finish() == 0  # the program's end ends the follow
        assert script.finish() == 0
    finally:
        if follower is not None:
            follower.kill()
        script.kill_session()
    assert re.search(r"Program serving stops: launchpad stop from pid \d+", script.output)
    assert cli("ls").stdout == (f"launchpad: no program of this user runs (records under "
                                f"{run_records.root(run_dir)})\n")


def test_a_stop_that_does_not_end_in_time_says_so(run_dir):
    script, run_id = helpers.launch_serving()
    try:
        # (ending the nodes' processes takes far longer than this)
        assert failed(cli("stop", "--timeout", "0.000001")) == (
            f"launchpad: run {run_id} has not stopped within 1e-06 s (its nodes are still in "
            f"their grace period, or do not end); `launchpad status {run_id}` shows which")
        assert script.finish() == 0  # it was asked to stop, and does
    finally:
        script.kill_session()
