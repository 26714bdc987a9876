"""The `launchpad` command (also runnable as `python -m launchpad.cli`).

    launchpad launch path/to/launch.py [FLAGS...]    runs a launch script (cli/launching.py)
    launchpad ls                                     this user's running programs (cli/runs.py)
    launchpad status [RUN] [--json]                  a program's node table (cli/status.py)
    launchpad logs [RUN] NODE [-f]                   a node's output (cli/logs.py)
    launchpad stop [RUN] [--timeout SECS]            stops a program (cli/runs.py)
    launchpad scale [RUN] GROUP COUNT                grows or shrinks a group (cli/scale.py)
    launchpad apply [RUN] MODULE:FUNCTION            changes it into its next version (apply.py)
    launchpad kubernetes-manifests MODULE:FUNCTION -o DIR ...   a program's Kubernetes objects
    launchpad graph MODULE:FUNCTION -o FILE ...                 a program's picture
                                                                (both: cli/programs.py)

ls, status, logs, stop, scale and apply find runs in the run registry (launch/run_registry.py)
and ask their controllers over the controller protocol; RUN is a run id (or its unique
beginning), needed only when more than one program runs.

Bad input, a run that is gone, a node the program does not have, a program function that
raises: one line on stderr (`launchpad: ...`) and a non-zero exit status.
"""

from __future__ import annotations

import argparse
import importlib.metadata
from collections.abc import Sequence

from launchpad import courier
from launchpad.cli import apply, launching, logs, programs, runs, scale, status
from launchpad.errors import ControllerProtocolError
from launchpad.launch.runtime.errors import LaunchError


def _version() -> str:
    """The installed distribution's version; "unknown" when run from a tree not installed."""
    try:
        return importlib.metadata.version("launchpad-next")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="launchpad", description="Launchpad's tools.")
    parser.add_argument("--version", action="version", version=f"launchpad-next {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    # Each command's parser sets `handler`: its function of the parsed arguments -> exit status.
    launching.add_parser(commands)
    runs.add_parsers(commands)
    status.add_parser(commands)
    logs.add_parser(commands)
    scale.add_parser(commands)
    apply.add_parser(commands)
    programs.add_parsers(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command with `argv` (default sys.argv[1:]); its exit status.

    Raises:
      SystemExit: the command failed (its message says why, in one line), or a launch
        script exited (its status).
    """
    args = _parser().parse_args(argv)
    if args.handler is launching.run:
        return args.handler(args)  # a launch script's errors are its own, as under `python`
    try:
        return args.handler(args)
    except (LaunchError, courier.CourierError, ControllerProtocolError,
            TimeoutError) as e:
        raise SystemExit(f"launchpad: {str(e).splitlines()[0]}") from e
