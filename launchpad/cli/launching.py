"""`launchpad launch [--dry-run] [--resume RUN] path/to/launch.py [FLAGS...]`: runs a launch
script as `python path/to/launch.py FLAGS...` would (`--dry-run` gives it --lp_dry_run: its
launches print what they would start, and start nothing; `--resume RUN` gives it
--lp_resume=RUN: its stateful nodes start from their states of that run).

The script runs in this process as `__main__` (runpy), with sys.argv its path and flags (so
its own `app.run` parses its absl flags, --lp_* included) and its folder first on sys.path;
its exit status is the command's, its errors and tracebacks are its own, and the interpreter's
exit waits for the programs it launched, as under `python`.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "launch", help="run a launch script (as python would)",
        description="Runs a launch script as `python SCRIPT FLAGS...` would.")
    parser.add_argument("--dry-run", action="store_true",
                        help="print what the script's launches would start (under slurm: "
                             "each node's host slot and the sbatch request), starting nothing "
                             "(the script gets --lp_dry_run)")
    parser.add_argument("--resume", metavar="RUN",
                        help="start the stateful nodes (lp.StatePolicy) from their latest "
                             "states of run RUN (the script gets --lp_resume=RUN)")
    parser.add_argument("script", metavar="SCRIPT", help="the launch script, e.g. launch.py")
    parser.add_argument("flags", nargs=argparse.REMAINDER, metavar="FLAGS",
                        help="its command line (absl flags, --lp_launch_type=... included)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Runs the script; 0 once it returns (a SystemExit of its own ends the command)."""
    if not os.path.isfile(args.script):
        raise SystemExit(f"launchpad: no launch script {args.script!r}")
    given = [*(["--lp_dry_run"] if args.dry_run else []),
             *([f"--lp_resume={args.resume}"] if args.resume else [])]
    sys.argv = [args.script, *given, *args.flags]
    sys.path[0] = os.path.dirname(os.path.abspath(args.script))  # as python sets it
    runpy.run_path(args.script, run_name="__main__")
    return 0
