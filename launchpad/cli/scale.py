"""`launchpad scale [RUN] GROUP COUNT`: a running program's group grown or shrunk to COUNT nodes.

Its controller makes the change (Controller.scale): new nodes are made as the group's first
was and started by the program's launcher; removed ones, the highest indices, stop gracefully
first. It prints the nodes added or removed; a change the program cannot make (no such group,
a launcher that cannot start nodes of a running program) is one line on stderr.
"""

from __future__ import annotations

import argparse

from launchpad.cli import runs


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "scale", help="grow or shrink a group of a running program",
        description="Makes a group of a running program COUNT nodes: new ones made as its "
                    "first node was, removed ones (the highest indices) stopped gracefully.",
        usage="launchpad scale [-h] [--timeout SECS] [--run-dir DIR] [--namespace NS] "
              "[RUN] GROUP COUNT")
    parser.add_argument("names", nargs="+", metavar="[RUN] GROUP COUNT",
                        help="the run (default: the one running program), the group's label "
                             "and how many nodes it should have")
    parser.add_argument("--timeout", type=float, default=120.0, metavar="SECS",
                        help="how long to wait for the change (default 120)")
    runs.add_run_dir(parser)
    runs.add_namespace(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if len(args.names) not in (2, 3):
        runs.fail("scale takes [RUN] GROUP COUNT")
    *given, label, count = args.names
    if not count.isdigit():
        runs.fail(f"COUNT must be a whole number of nodes, got {count!r}")
    with runs.asking(given[0] if given else None, args) as (run_id, controller):
        changed = controller.scale(label, int(count), timeout=args.timeout)
    # Added nodes are below COUNT; removed ones at or above it.
    added = [name for name in changed if int(name.rpartition("/")[2]) < int(count)]
    removed = [name for name in changed if name not in added]
    said = ([f"added {', '.join(added)}"] if added else []) + (
        [f"removed {', '.join(removed)}"] if removed else [])
    nodes = "node" if int(count) == 1 else "nodes"
    print(f"launchpad: group {label!r} of run {run_id} has {int(count)} {nodes}"
          f" ({'; '.join(said) or 'as it had'})")
    return 0
