"""`launchpad ls` and `launchpad stop`, and how every command finds the run it is given.

    launchpad ls [--run-dir DIR | --namespace NS]
    launchpad stop [RUN] [--timeout SECS] [--run-dir DIR | --namespace NS]

The runs are those of the run registry (launch/run_registry.py): this user's programs whose
controllers answer, local or in a cluster, attached or detached. RUN is a run id, or the
beginning of exactly one; it may be left out while only one program runs. A Kubernetes
launch keeps no record here: `--namespace NS` lists or stops those of that namespace, found
through the cluster's API (RUN is then the launch's id).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import Any, NoReturn

from launchpad import control, courier
from launchpad.launch import run_registry
from launchpad.launch.runtime import run_records
from launchpad.launch.runtime.errors import LaunchError

CALL_SECS = 30.0  # how long a controller may take to answer a command's question
_POLL_SECS = 0.05  # how often `stop` looks whether the run's record is gone yet


def fail(message: str) -> NoReturn:
    """Ends the command: `message` on stderr as one line, exit status 1."""
    raise SystemExit(f"launchpad: {message}")


def add_run_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run-dir", metavar="DIR", default=None,
                        help="where runs are recorded (default $LAUNCHPAD_RUN_DIR, else "
                             "~/.launchpad; a Slurm launch's SlurmSettings.run_dir)")


def add_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", metavar="RUN", nargs="?", default=None,
                        help="the run id, or its beginning (default: the one running program)")


def add_namespace(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespace", metavar="NS", default=None,
                        help="for a Kubernetes launch: its namespace (RUN is then its launch "
                             "id, asked through the cluster's API; the launch needs "
                             "KubernetesSettings(allow_changes=True))")


def add_parsers(commands: argparse._SubParsersAction) -> None:
    listing = commands.add_parser(
        "ls", help="list this user's running programs",
        description="Lists this user's running programs: run id, program, launch type, "
                    "start time.")
    add_run_dir(listing)
    listing.add_argument("--namespace", metavar="NS", default=None,
                         help="list the Kubernetes launches running in namespace NS (found "
                              "through the cluster's API) instead")
    listing.set_defaults(handler=ls)
    stopping = commands.add_parser(
        "stop", help="stop a running program",
        description="Asks a program to stop and waits until it has.")
    add_run(stopping)
    stopping.add_argument("--timeout", type=float, default=60.0, metavar="SECS",
                          help="how long to wait for it to stop (default 60)")
    add_run_dir(stopping)
    stopping.add_argument("--namespace", metavar="NS", default=None,
                          help="for a Kubernetes launch: its namespace (RUN is then its "
                               "launch id); its objects are deleted, each pod stopping "
                               "gracefully")
    stopping.set_defaults(handler=stop)


def running(run_dir: str | None) -> list[run_records.Run]:
    """The running programs (stale records cleaned); folders refused are named on stderr."""
    found, refused = run_registry.runs(run_dir)
    for why in refused:
        print(f"launchpad: skipped: {why}", file=sys.stderr)
    return found


def find(given: str | None, run_dir: str | None) -> run_records.Run:
    """The run `given` names (None: the only one).

    Raises:
      SystemExit: no run, or more than one, matches (the running ones are named).
    """
    found = running(run_dir)
    ids = ", ".join(run.run_id for run in found) or "none"
    if given is None:
        if len(found) == 1:
            return found[0]
        if not found:
            fail(f"no program of this user runs (records under {run_records.root(run_dir)})")
        fail(f"{len(found)} programs run; name one: {ids}")
    matches = ([run for run in found if run.run_id == given]
               or [run for run in found if run.run_id.startswith(given)])
    if len(matches) == 1:
        return matches[0]
    if not matches:
        fail(f"no running program {given!r} of this user (it has ended, or never ran); "
             f"running: {ids}")
    fail(f"{given!r} names {len(matches)} runs: {', '.join(r.run_id for r in matches)}")


def client(run: run_records.Run) -> control.ControllerClient:
    return control.ControllerClient(run.controller_address, run.token, run.tls)


# What a controller's refusal of a question is (its own words, one line).
_REFUSALS = (ValueError, NotImplementedError, RuntimeError, LaunchError)


@contextlib.contextmanager
def changing(run: run_records.Run) -> Iterator[control.ControllerClient]:
    """A client of `run`'s controller, for a change it may refuse (scale, apply): a refusal,
    or a run that is gone, is one line and exit status 1."""
    controller = client(run)
    try:
        yield controller
    except courier.ServerUnavailableError:
        gone(run)
    except _REFUSALS as e:
        fail(str(e))
    finally:
        controller.close()


@contextlib.contextmanager
def asking(given: str | None, args: argparse.Namespace) -> Iterator[tuple[str, Any]]:
    """(the id of the run `given` names, a client of its controller) for a question it may
    refuse, as `changing` gives; with `--namespace`, of a Kubernetes launch, asked through
    its cluster's API (a RemoteController's `controller_client`)."""
    if args.namespace is None:
        run = find(given, args.run_dir)
        with changing(run) as controller:
            yield run.run_id, controller
        return
    if given is None:
        fail("--namespace takes RUN: the launch's id (its launchpad.dev/launch label)")
    from launchpad.launch import attach  # (the engines, only for a run the registry lacks)

    try:
        controller = attach.attach(given, namespace=args.namespace).controller_client()
        yield given, controller
    except _REFUSALS as e:
        fail(str(e))


def gone(run: run_records.Run) -> NoReturn:
    """Ends the command: the run's controller stopped answering."""
    fail(f"run {run.run_id} is gone: its controller at {run.controller_address} does not "
         "answer (the program has ended)")


def ls(args: argparse.Namespace) -> int:
    if args.namespace is not None:
        found = _in_namespace(args.namespace)
        none_here = f"no launch runs in namespace {args.namespace}"
    else:
        found = running(args.run_dir)
        none_here = (f"no program of this user runs (records under "
                     f"{run_records.root(args.run_dir)})")
    if not found:
        print(f"launchpad: {none_here}")
        return 0
    rows = [("RUN", "PROGRAM", "LAUNCH TYPE", "STARTED")] + [
        (run.run_id, run.program, run.launch_type,
         time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.started_at))
         + (f"  ({run.pending})" if run.pending else ""))
        for run in found]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print("  ".join([cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
                        + [row[3]]))
    return 0


def _in_namespace(namespace: str) -> list[run_records.Run]:
    from launchpad.launch import attach  # (the engines, only for runs the registry lacks)

    try:
        return attach.runs_in(namespace)
    except LaunchError as e:
        fail(str(e))


def _cancel_pending(run: run_records.Run, timeout: float) -> int:
    """Stops a run that waits to start: its job is cancelled (nothing of it runs yet)."""
    from launchpad.launch import attach
    from launchpad.launch.runtime.controllers import ProgramController
    controller: ProgramController = attach.attach(
        run.run_id, os.path.dirname(os.path.dirname(run.folder)))
    controller.stop(f"launchpad stop from pid {os.getpid()}")
    if not controller.wait(timeout=timeout):
        fail(f"run {run.run_id} is still in the cluster's queue {timeout:g} s after its "
             "job was cancelled")
    print(f"launchpad: stopped run {run.run_id} (program {run.program}): its job was "
          "cancelled before it ran")
    return 0


def stop(args: argparse.Namespace) -> int:
    if args.namespace is not None:
        return _stop_in_namespace(args.run, args.namespace, args.timeout)
    run = find(args.run, args.run_dir)
    if run.pending:
        return _cancel_pending(run, args.timeout)
    controller = client(run)
    deadline = time.monotonic() + args.timeout
    try:
        controller.request_stop(f"launchpad stop from pid {os.getpid()}")
        controller.wait_for_end(args.timeout)
    except courier.ServerUnavailableError:
        pass  # it ended before it could say so
    except TimeoutError:
        fail(f"run {run.run_id} has not stopped within {args.timeout:g} s (its nodes are "
             "still in their grace period, or do not end); `launchpad status "
             f"{run.run_id}` shows which")
    finally:
        controller.close()
    record = os.path.join(run.folder, run_registry.RECORD)
    while os.path.exists(record) and time.monotonic() < deadline:
        time.sleep(_POLL_SECS)  # its launcher removes it once the program has ended
    print(f"launchpad: stopped run {run.run_id} (program {run.program})")
    return 0


def _stop_in_namespace(given: str | None, namespace: str, timeout: float) -> int:
    """Stops the Kubernetes launch `given` of `namespace` and waits for its end."""
    if given is None:
        fail("--namespace takes RUN: the launch's id (its launchpad.dev/launch label)")
    from launchpad.launch import attach  # (the engines, only for runs the registry lacks)

    try:
        controller = attach.attach(given, namespace=namespace)
        controller.stop(f"launchpad stop from pid {os.getpid()}")
        ended = controller.wait(timeout=timeout, raise_error=False)
    except LaunchError as e:
        fail(str(e))
    if not ended:
        fail(f"launch {given} has not stopped within {timeout:g} s (its pods are still in "
             "their grace period)")
    print(f"launchpad: stopped run {given} (program {controller.program_name})")
    return 0
