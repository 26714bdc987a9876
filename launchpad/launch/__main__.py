"""`python -m launchpad.launch`: what launchers start on a node's host.

    python -m launchpad.launch --spec PATH     runs one node (node_process/runner.py); - reads
                                               stdin
    python -m launchpad.launch --standalone PATH
                                               runs one pickled node outside any launch (a
                                               MultiProcessingColocation's child, run by
                                               hand as Launchpad's tests do)
    python -m launchpad.launch --agent PATH    a host agent: starts and watches the nodes of
                                               its host (node_process/host_agent.py)
    python -m launchpad.launch --NAME PATH     an engine's entry point, from its row of the
                                               table of engines (launchers.py): `--help`
                                               lists them

A module of its own, so that none is imported by the package before it runs; each imports
only what it runs (a node's process: the runner, and then its node's code).
"""

import argparse
from collections.abc import Callable


def _run_node(path: str) -> int:
    from launchpad.launch.node_process import runner

    runner.exit_process(runner.run_process(runner.read_spec(path)))


def _run_standalone(path: str) -> int:
    from launchpad.launch.node_process import runner

    runner.exit_process(runner.run_standalone(path))


def _run_agent(path: str) -> int:
    from launchpad.launch.node_process import host_agent

    return host_agent.run(path)


def _entry_points() -> dict[str, tuple[Callable[[str], int], str]]:
    """What each --NAME runs, and its help: ours, then the engines'."""
    from launchpad.launch import launchers

    entries = {
        "spec": (_run_node, "the node's spec: a private file, or - for stdin"),
        "standalone": (_run_standalone, "a pickled node (a private file), run outside any "
                                        "launch"),
        "agent": (_run_agent, "a host agent's spec (a private file)"),
    }
    for name, (engine, entry) in launchers.entry_points().items():
        entries[name] = (lambda path, e=engine, f=entry.function: e.load(f)(path), entry.help)
    return entries


def main(argv: list[str] | None = None) -> int:
    """Runs what `argv` (default: the command line's) names; returns the exit status."""
    entries = _entry_points()
    parser = argparse.ArgumentParser(prog="python -m launchpad.launch",
                                     description="Runs a node of a launchpad program, or "
                                                 "what an engine runs on its hosts.")
    what = parser.add_mutually_exclusive_group(required=True)
    for name, (_, help_text) in entries.items():
        what.add_argument(f"--{name}", metavar="PATH", dest=name, help=help_text)
    args = vars(parser.parse_args(argv))
    name, path = next((name, path) for name, path in args.items() if path is not None)
    return entries[name][0](path)


if __name__ == "__main__":
    raise SystemExit(main())
