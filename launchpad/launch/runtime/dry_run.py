"""Dry runs: what a launch would start, said before anything starts.

    lp.launch(program, ..., dry_run=True)      # or --lp_dry_run, or
    launchpad launch --dry-run launch.py ...   # the same flag given to the script

Everything a launch checks is checked (the program, its options, and under slurm the
placement against the cluster's hosts, so a layout that cannot fit is refused as it would
be); then the plan is printed (its launcher's `plan`: under slurm each node's host slot and
the sbatch request) and nothing is submitted or started. `lp.launch` returns a DryRun,
whose waits return at once, so a launch script runs to its end unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from launchpad.launch.runtime import terminals
from launchpad.program import Program


class DryRun:
    """What `lp.launch` returns under a dry run: the plan, and a ProgramController's calls
    (controllers.py), which have nothing to do."""

    def __init__(self, program: Program, launch_type: str, text: str):
        self.program_name = program.name
        self.launch_type = launch_type
        self.plan = text
        self.run_id = ""
        self.stop_reason = "dry run: nothing was started"
        self.failure = None

    def say(self) -> DryRun:
        """Prints the plan (on stdout: it is the run's output), then that it was a dry run."""
        print(self.plan, flush=True)
        terminals.say(f"dry run of {self.program_name!r}: nothing was started")
        return self

    def wait(self, labels_to_wait_for: Sequence[str] | str | None = None,
             raise_error: bool = True, return_on_first_completed: bool = False, *,
             timeout: float | None = None) -> bool:
        """Returns at once: nothing runs."""
        return True

    def stop(self, *args: Any, **kwargs: Any) -> None:
        pass

    def kill(self) -> None:
        pass

    def stop_and_wait(self) -> bool:
        return True

    def exit_codes(self) -> dict[str, int | None]:
        return {}

    def restarts(self) -> dict[str, int]:
        return {}

    def status(self) -> None:
        """None: there is no controller to ask."""

    def scale(self, label: str, count: int) -> list[str]:
        raise RuntimeError(f"Program {self.program_name!r} was a dry run: it has no running "
                           "group to scale")

    def plan(self, program: Program) -> None:
        raise RuntimeError(f"Program {self.program_name!r} was a dry run: nothing runs to "
                           "change")

    apply = plan

    def __enter__(self) -> DryRun:
        return self

    def __exit__(self, *exc: object) -> None:
        pass
