"""`launchpad apply`: a running program changed into its next version from the command line,
the plan shown first; what cannot change live said, and nothing applied."""

from __future__ import annotations

import pytest

from tests.cli import helpers
from tests.cli.helpers import cli, failed

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("no_leaked_processes")]

TARGET = "tests.cli.serving:make_program"


def test_apply_shows_the_plan_then_replaces_and_adds_nodes(run_dir):
    script, run_id = helpers.launch_serving()
    try:
        helpers.wait_for_all(script, [r"\[worker/1\] worker 1 ready"])
        planned = cli("apply", run_id, TARGET, "--arg", "greeting=hello", "--arg",
                      "workers=3", "--plan")
        assert (planned.returncode, planned.stderr) == (0, "")
        assert planned.stdout == (
            "Program 'serving': 1 to add, 2 to replace, 0 to remove, 4 unchanged\n"
            "  + worker/2\n  ~ worker/0\n  ~ worker/1\n"
            "launchpad: plan only (--plan): nothing was applied\n")
        other = cli("apply", run_id, TARGET, "--arg", "greeting=hello", "--only", "echo")
        assert other.stdout == (
            "Program 'serving': 0 to add, 0 to replace, 0 to remove, 4 unchanged, 2 left as "
            "they run\n  = worker/0 (differs; its group is not among those applied)\n"
            "  = worker/1 (differs; its group is not among those applied)\n"
            "launchpad: nothing to apply\n"), other.stdout
        unasked = cli("apply", run_id, TARGET, "--arg", "greeting=hello")
        assert (unasked.returncode, unasked.stderr) == (1, (
            "launchpad: nothing was applied (apply with --yes where no terminal asks)\n"))
        assert "  ~ worker/1\n" in unasked.stdout  # the plan, shown first
        applied = cli("apply", TARGET, "--arg", "greeting=hello", "--arg", "workers=3",
                      "--yes")  # (the one running program)
        assert applied.stdout.endswith(f"launchpad: applied to run {run_id}: 1 added, 2 "
                                       "replaced, 0 removed\n"), applied.stdout
        helpers.wait_for_all(script, [r"\[worker/0\] worker 0 hello",
                                      r"\[worker/2\] worker 2 hello"])
        again = cli("apply", run_id, TARGET, "--arg", "greeting=hello", "--arg", "workers=3")
        assert again.stdout.endswith("7 unchanged\nlaunchpad: nothing to apply\n")
        status = cli("status", run_id).stdout
        assert "worker/2" in status
        assert ": applied a new version: added worker/2; replaced worker/0, worker/1\n" in \
            status, status
    finally:
        cli("stop", run_id)
        script.kill_session()


def test_apply_refuses_what_cannot_change_live_and_names_why(run_dir):
    script, run_id = helpers.launch_serving()
    try:
        helpers.wait_for_all(script, [r"\[worker/1\] worker 1 ready"])
        refused = cli("apply", run_id, "tests.cli.test_apply:renamed", "--yes")
        assert refused.returncode == 1
        assert "! the new program is named 'elsewhere', the running one 'serving'" in \
            refused.stdout
        assert refused.stderr == ("launchpad: the changes marked ! cannot be made while the "
                                  "program runs; nothing was applied\n")
        missing = cli("apply", run_id, "tests.cli.serving:no_such_function")
        assert failed(missing) == ("launchpad: module tests.cli.serving has no function "
                                   "'no_such_function'")
    finally:
        cli("stop", run_id)
        script.kill_session()


def renamed():
    from tests.cli import serving
    program = serving.make_program()
    program._name = "elsewhere"
    return program
