"""`launchpad launch SCRIPT FLAGS...` runs a launch script as `python SCRIPT FLAGS...` does."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.cli.helpers import TIMEOUT, cli
from tests.processes import ROOT

pytestmark = pytest.mark.usefixtures("no_leaked_processes")


def test_the_script_runs_as_main_with_its_flags_and_exit_status():
    args = ["tests/cli/exits.py", "--greeting=hello", "--status=3", "extra"]
    by_python = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True,
                               text=True, timeout=TIMEOUT)
    by_launchpad = cli("launch", *args)
    assert by_launchpad.returncode == by_python.returncode == 3
    assert by_launchpad.stdout == by_python.stdout == (
        "greeting=hello argv=['extra'] name=__main__ path0=tests/cli\n")


def test_a_flag_the_script_does_not_define_is_refused_by_its_own_parser():
    result = cli("launch", "tests/cli/exits.py", "--no_such_flag=1")
    assert result.returncode == 1
    assert "Unknown command line flag 'no_such_flag'" in result.stderr
