"""`launchpad scale`: a running program's group grown and shrunk from the command line, and
what it cannot change said in one line."""

from __future__ import annotations

import re

import pytest

from tests.cli import helpers
from tests.cli.helpers import cli, failed

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("no_leaked_processes")]


def test_scale_grows_and_shrinks_a_group_of_a_running_program(run_dir):
    script, run_id = helpers.launch_serving()
    try:
        helpers.wait_for_all(script, [r"\[worker/1\] worker 1 ready"])
        grown = cli("scale", run_id, "worker", "3")
        assert (grown.returncode, grown.stderr) == (0, "")
        assert grown.stdout == (f"launchpad: group 'worker' of run {run_id} has 3 nodes "
                                "(added worker/2)\n")
        # Made as the group's first node was: its function, its arguments.
        helpers.wait_for_all(script, [r"\[worker/2\] worker 0 ready"])
        shrunk = cli("scale", "worker", "1")  # (the one running program)
        assert shrunk.stdout == (f"launchpad: group 'worker' of run {run_id} has 1 node "
                                 "(removed worker/2, worker/1)\n")
        status = cli("status", run_id).stdout
        rows = [line.split()[0] for line in status.splitlines()[2:] if line.strip()]
        assert "worker/0" in rows and "worker/1" not in rows
        # The changes, with their times, under the table.
        assert re.search(r"changed \d\d:\d\d:\d\d: group 'worker': 2 -> 3 nodes "
                         r"\(added worker/2\)\nchanged \d\d:\d\d:\d\d: group 'worker': 3 -> 1 "
                         r"nodes \(removed worker/2, worker/1\)", status), status
        assert failed(cli("scale", run_id, "actor", "2")) == (
            "launchpad: Program 'serving' has no group 'actor'; its groups are crasher, echo, "
            "gate, main, worker")
        assert failed(cli("scale", run_id, "worker", "two")) == (
            "launchpad: COUNT must be a whole number of nodes, got 'two'")
    finally:
        cli("stop", run_id)
        script.kill_session()
