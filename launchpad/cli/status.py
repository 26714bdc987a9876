"""`launchpad status [RUN] [--json] [--namespace NS]`: a running program's node table, from its
controller (a Kubernetes launch's through its cluster's API, with `--namespace`).

Plain text (launch/runtime/status_text.py: the same table the live view shows): each node's name,
type, state, host, pid, restarts, uptime, CPU, memory, calls per second, errors and latency
percentiles, then why the program stopped and each failed node's last failure. `--json`
prints the controller's whole `telemetry.ProgramStatus` instead (per-method counters
included).
"""

from __future__ import annotations

import argparse
import dataclasses
import json

from launchpad import courier, telemetry
from launchpad.cli import runs
from launchpad.launch.runtime import run_records, status_text


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "status", help="show a running program's nodes",
        description="Shows each node of a running program: state, host, pid, restarts, "
                    "uptime, CPU, memory, calls, errors, latency.")
    runs.add_run(parser)
    parser.add_argument("--json", action="store_true",
                        help="print the whole status as JSON")
    runs.add_run_dir(parser)
    runs.add_namespace(parser)
    parser.set_defaults(handler=run)


def of(run: run_records.Run) -> telemetry.ProgramStatus:
    """The run's status now, from its controller (a run that waits to start has none yet:
    'pending', with what it waits for).

    Raises:
      SystemExit: its controller is gone.
    """
    if run.pending:
        return run.pending_status()
    client = runs.client(run)
    try:
        return client.status(runs.CALL_SECS)
    except courier.ServerUnavailableError:
        runs.gone(run)
    finally:
        client.close()


def run(args: argparse.Namespace) -> int:
    if args.namespace is None:
        status = of(runs.find(args.run, args.run_dir))
    else:
        with runs.asking(args.run, args) as (_, client):
            status = client.status(runs.CALL_SECS)
    if args.json:
        print(json.dumps(dataclasses.asdict(status), indent=1))
    else:
        print(status_text.render(status))
    return 0
