"""Where runs keep their records: a private folder per run, named by the run id, under
`<run_dir>/launchpad-runs-<uid>/` (run_dir: the one a launch gives, else $LAUNCHPAD_RUN_DIR,
else ~/.launchpad).

Every launch that `launchpad ls` lists has one: a local or attached cluster launch's holds
`run.json` (run_registry.py: the controller's address and token, removed when the run ends);
a Slurm run's is on the filesystem the cluster shares (its node specs, logs and, for a
detached run, the job id, the controller's address and the program's outcome); a detached
Ray run's holds what `lp.attach` needs to reach its controller. The folders are private_files
folders: the records hold the program's token, and some are unpickled, so no other user may
write them. `Run` is what a record says of a running program, whichever launcher wrote it.
"""

from __future__ import annotations

import dataclasses
import datetime
import os

from launchpad import telemetry
from launchpad.courier import TLS
from launchpad.launch.runtime import private_files
from launchpad.launch.runtime.errors import LaunchError

DEFAULT_RUN_DIR = os.path.join(os.path.expanduser("~"), ".launchpad")
RUN_DIR_VARIABLE = "LAUNCHPAD_RUN_DIR"
_STAMP = "%Y%m%d-%H%M%S"


@dataclasses.dataclass
class Run:
    """A run as its record tells it: enough to list it and to reach its controller."""

    run_id: str
    program: str
    launch_type: str
    started_at: float  # unix time
    controller_address: str
    token: str
    tls: TLS | None
    folder: str
    launcher_pid: int = 0  # the launching process (0: detached, its launcher may go)
    launcher_id: str = ""  # what tells that process apart (run_registry.py)
    log_dir: str | None = None
    # What a run whose controller has not started yet waits for (a detached Slurm job
    # pending, with Slurm's reason); its controller_address and token are '' until then.
    pending: str = ""

    def pending_status(self) -> telemetry.ProgramStatus:
        """The status of a run that waits to start (`pending`): no node runs yet."""
        return telemetry.ProgramStatus(
            program=self.program, launch_type=self.launch_type, run_id=self.run_id,
            started_at=self.started_at, state="pending", stop_reason="", failure="",
            nodes=[], log_dir=self.log_dir, pending=self.pending)


def run_dir(given: str | None = None) -> str:
    """The folder run records are kept under: `given`, else $LAUNCHPAD_RUN_DIR, else
    ~/.launchpad."""
    return given or os.environ.get(RUN_DIR_VARIABLE) or DEFAULT_RUN_DIR


def root(given: str | None = None) -> str:
    """This user's folder of run folders: `<run_dir>/launchpad-runs-<uid>`."""
    return os.path.join(run_dir(given), f"launchpad-runs-{os.geteuid()}")


def make(program_name: str, given: str | None = None) -> str:
    """A new private folder for a run of `program_name`; its name is the run id."""
    stamp = datetime.datetime.now().strftime(_STAMP)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in program_name)
    return private_files.make_private_dir(f"{safe}-{stamp}-", root(given))


def find(run_id: str, given: str | None = None) -> str:
    """The folder of run `run_id` of this user.

    Raises:
      LaunchError: there is no such run (the runs there are named).
    """
    folder = os.path.join(root(given), run_id)
    if os.sep in run_id or not run_id or not os.path.isdir(folder):
        known = sorted(os.listdir(root(given))) if os.path.isdir(root(given)) else []
        raise LaunchError(f"No run {run_id!r} of this user under {root(given)}; runs there: "
                          f"{', '.join(known) or 'none'}")
    return folder


def program_name_of(run_id: str) -> str:
    """The program's name, from its run id (`<name>-<date>-<time>-<random>`)."""
    return run_id.rsplit("-", 3)[0]


def started_at_of(run_id: str) -> float:
    """When the run's folder was made (unix time, to the second), from its run id."""
    date, time_of_day = run_id.rsplit("-", 3)[1:3]
    return datetime.datetime.strptime(f"{date}-{time_of_day}", _STAMP).timestamp()
