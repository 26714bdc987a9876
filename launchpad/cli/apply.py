"""`launchpad apply [RUN] MODULE:FUNCTION`: a running program changed into its next version.

FUNCTION (with `--arg NAME=VALUE`s, as `launchpad graph` calls it) returns the new Program,
built here with the code as it is now. The plan comes first, as `terraform plan` shows one:
each node added (+), replaced (~: its code or arguments changed) or removed (-), how many are
unchanged, and every change that cannot be made live (!, with its reason). Then, asked on a
terminal (or with --yes), the run's controller applies it: replaced nodes stop gracefully -
their StatePolicy state is saved - and start again with the new code, restoring it; the
unchanged ones keep running. `--plan` only shows the plan; `--only GROUP` changes that group
alone (as terraform's -target), the others running on as they are however they differ. The
new program's code travels with it (by value), so the controller's process, which loaded the
older code, can read it.
"""

from __future__ import annotations

import argparse
import sys

from launchpad.cli import programs, runs
from launchpad.launch.runtime import serialization


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "apply", help="change a running program into its next version (the plan first)",
        description="Compares a running program with the one MODULE:FUNCTION returns, node "
                    "by node; shows the plan, then applies it.",
        usage="launchpad apply [-h] [--plan] [--yes] [--only GROUP] [--arg NAME=VALUE] "
              "[--timeout SECS] [--run-dir DIR] [--namespace NS] [RUN] MODULE:FUNCTION")
    parser.add_argument("names", nargs="+", metavar="[RUN] MODULE:FUNCTION",
                        help="the run (default: the one running program) and the function "
                             "returning the new program, e.g. examples.d4pg.launch:"
                             "make_program")
    parser.add_argument("--plan", action="store_true", help="only show the plan")
    parser.add_argument("--only", action="append", default=[], metavar="GROUP",
                        help="change this group alone (may be repeated); the others run on "
                             "as they are, however they differ")
    parser.add_argument("--yes", action="store_true", help="apply without asking")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="SECS",
                        help="how long to wait for the change (default 600)")
    programs.add_program_arguments(parser)
    runs.add_run_dir(parser)
    runs.add_namespace(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if len(args.names) not in (1, 2):
        runs.fail("apply takes [RUN] MODULE:FUNCTION")
    *given, target = args.names
    program = programs.load_program(target, dict(programs.keyword(a) for a in args.arg))
    shipped = serialization.pickle_program_change(program)
    with runs.asking(given[0] if given else None, args) as (run_id, controller):
        plan = controller.change(*shipped, apply=False, only=args.only,
                                 timeout=args.timeout)
        print(plan)
        if plan.refused:
            runs.fail("the changes marked ! cannot be made while the program runs; nothing "
                      "was applied")
        if not plan.changes or args.plan:
            print("launchpad: nothing to apply" if not plan.changes else
                  "launchpad: plan only (--plan): nothing was applied")
            return 0
        if not args.yes and not _confirmed(run_id):
            runs.fail("nothing was applied (apply with --yes where no terminal asks)")
        applied = controller.change(*shipped, apply=True, only=args.only,
                                    timeout=args.timeout)
    print(f"launchpad: applied to run {run_id}: {len(applied.added)} added, "
          f"{len(applied.replaced)} replaced, {len(applied.removed)} removed")
    return 0


def _confirmed(run_id: str) -> bool:
    """Whether the user, on a terminal, says yes."""
    if not sys.stdin.isatty():
        return False
    return input(f"Apply these changes to run {run_id}? [y/N] ").strip().lower() in ("y",
                                                                                    "yes")
