"""Dry runs: what a launch would start, said before anything starts.

    lp.launch(program, ..., dry_run=True)      # or --lp_dry_run, or
    launchpad launch --dry-run launch.py ...   # the same flag given to the script

Everything a launch checks is checked (the program, its options, and under slurm the
placement against the cluster's hosts, so a layout that cannot fit is refused as it would
be); then the plan is printed - under slurm each node's host slot and the sbatch request -
and nothing is submitted or started. `lp.launch` returns a DryRun, whose waits return at
once, so a launch script runs to its end unchanged.
"""

from __future__ import annotations

import sys
from typing import Any

from launchpad.program import Program

# What runs each node under the launch types that plan no placement of their own.
_WHERE = {"local_mt": "a thread of this process", "test_mt": "a thread of this process",
          "local_mp": "a process of this host", "test_mp": "a process of this host",
          "ray": "a Ray actor", "kubernetes": "a pod"}


def plan(program: Program, launch_type: str, launcher: Any, options: dict[str, Any]) -> str:
    """The plan of `program` under `launch_type`: the launcher's own (its `dry_run`), else
    each node and what runs it."""
    if hasattr(launcher, "dry_run"):
        return launcher.dry_run(program, **options)
    nodes = program.get_all_nodes()
    lines = [f"Program {program.name!r} under {launch_type}: {len(nodes)} node"
             f"{'s' * (len(nodes) != 1)}, each {_WHERE.get(launch_type, 'started')}:"]
    lines += [f"  {node.name} ({type(node).__name__})" for node in nodes]
    return "\n".join(lines)


class DryRun:
    """What `lp.launch` returns under a dry run: the plan, and a controller's calls, which
    have nothing to do."""

    def __init__(self, program: Program, launch_type: str, text: str):
        self.program_name = program.name
        self.launch_type = launch_type
        self.plan = text
        self.run_id = ""
        self.stop_reason = "dry run: nothing was started"

    def say(self) -> DryRun:
        """Prints the plan (on stdout: it is the run's output), then that it was a dry run."""
        print(self.plan, flush=True)
        print(f"launchpad: dry run of {self.program_name!r}: nothing was started",
              file=sys.stderr, flush=True)
        return self

    def wait(self, *args: Any, **kwargs: Any) -> bool:
        return True

    def stop(self, *args: Any, **kwargs: Any) -> None:
        pass

    def kill(self) -> None:
        pass

    def stop_and_wait(self) -> bool:
        return True

    def exit_codes(self) -> dict[str, int | None]:
        return {}

    def __enter__(self) -> DryRun:
        return self

    def __exit__(self, *exc: object) -> None:
        pass
