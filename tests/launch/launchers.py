"""Launch scripts of tests.launch.programs run as a user runs them, in a process of their own,
and watched from outside: what they print, and when the processes they started are gone."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import time

from tests.processes import live_descendants

ROOT = pathlib.Path(__file__).parents[2]


def run_launcher(kind: str, grace: float = 60,
                 launch_type: str = "local_mp") -> tuple[subprocess.Popen, list[int]]:
    """Starts `python -m tests.launch.programs KIND GRACE TYPE` (stderr into stdout) and
    returns it once its program answers, with the pids of the program's processes."""
    launcher = subprocess.Popen([sys.executable, "-m", "tests.launch.programs", kind, str(grace),
                                 launch_type], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    line = "-"
    while line and not line.startswith("ready"):  # (a cluster launcher may log first)
        line = launcher.stdout.readline()
    assert line.startswith("ready"), "the launcher ended before its program was ready"
    return launcher, [int(pid) for pid in line.split()[1:]]


def wait_for_line(launcher: subprocess.Popen, text: str) -> None:
    """Reads the launcher's output up to a line holding `text`; fails if it ends first."""
    line = "-"
    while line and text not in line:
        line = launcher.stdout.readline()
    assert line, f"the launcher never printed {text!r}"


def wait_gone(pids, timeout: float) -> bool:
    """True once none of `pids` is alive (within `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not set(pids) & live_descendants():
            return True
        time.sleep(0.05)  # polls: no event tells when an unrelated process ends
    return False
