"""Where a cluster launch keeps the record of its run: a private folder per run, named by the
run id, under `<run_dir>/launchpad-runs-<uid>/` (default run_dir ~/.launchpad).

A Slurm run's folder is on the filesystem the cluster shares (its node specs, logs and, for a
detached run, the controller's address and the program's outcome); a detached Ray run's holds
what `lp.attach` needs to reach its controller. The folders are private_files folders: the
records hold the program's token and are unpickled, so no other user may write them.
"""

from __future__ import annotations

import datetime
import os

from launchpad.launch import private_files
from launchpad.launch.errors import LaunchError

DEFAULT_RUN_DIR = os.path.join(os.path.expanduser("~"), ".launchpad")


def make(program_name: str, run_dir: str | None = None) -> str:
    """A new private folder for a run of `program_name`; its name is the run id."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in program_name)
    return private_files.make_private_dir(f"{safe}-{stamp}-", run_dir or DEFAULT_RUN_DIR)


def find(run_id: str, run_dir: str | None = None) -> str:
    """The folder of run `run_id` of this user.

    Raises:
      LaunchError: there is no such run (the runs there are named).
    """
    root = os.path.join(run_dir or DEFAULT_RUN_DIR, f"launchpad-runs-{os.geteuid()}")
    folder = os.path.join(root, run_id)
    if os.sep in run_id or not run_id or not os.path.isdir(folder):
        known = sorted(os.listdir(root)) if os.path.isdir(root) else []
        raise LaunchError(f"No run {run_id!r} of this user under {root}; runs there: "
                          f"{', '.join(known) or 'none'}")
    return folder


def program_name_of(run_id: str) -> str:
    """The program's name, from its run id (`<name>-<date>-<time>-<random>`)."""
    return run_id.rsplit("-", 3)[0]
