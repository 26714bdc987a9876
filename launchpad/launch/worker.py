"""The entry point of a node's own process: `python -m launchpad.launch.worker --spec PATH`.

A process launcher writes a `WorkerSpec` (the node, pickled with cloudpickle, and how to reach
the program's controller) and starts this module on it, or hands the spec to a fork server that
runs `run_worker` in a fresh fork. The worker::

    load the spec -> node context (controller client, stop watcher) -> node.run()
      returns -> exit 0          raises -> write a failure report -> exit 1

The launcher learns how the node ended from the exit status, and why from the report (the
exception's type, message and traceback). The stop watcher holds a call to the controller that
returns when the program stops: then the node's stop event is set and its stop handlers run.
If the controller vanishes instead (the launching process was killed), the node is stopped the
same way. A process still alive when its controller has ended (or vanished) exits by itself
once the grace period is over: nothing is orphaned.

Only what the node needs is imported here: the courier client and the node's own code.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pickle
import sys
import threading
import time
import traceback
from typing import Any

import cloudpickle
from absl import flags
from absl import logging as absl_logging

from launchpad import context
from launchpad.courier import client as courier_client
from launchpad.launch import private_files, process, process_tree
from launchpad.launch.process import FailureReport, WorkerSpec

EXIT_NODE_RAISED = 1
EXIT_ORPHANED = 75  # EX_TEMPFAIL: the node outlived its program's controller


def _write_report(path: str, exc: BaseException) -> None:
    report = FailureReport(f"{type(exc).__name__}: {exc}",
                           "".join(traceback.format_exception(exc)), exc)
    try:
        data = cloudpickle.dumps(report)
    except Exception:  # noqa: BLE001 - an unpicklable exception still has its text
        report.exception = None
        data = pickle.dumps(report)
    private_files.write_private(path, data)


class ControllerClient:
    """The program's controller as seen from a node's process (a context.AddressBook)."""

    def __init__(self, address: str, token: str):
        # The controller exists before any node starts: if it cannot be reached, it is gone.
        self._client = courier_client.Client(address, token=token, wait_for_ready=False)

    def register(self, label: str, index: int, name: str, address: str) -> None:
        self._client.register(label, index, name, address)

    def address_of(self, label: str, index: int, name: str, timeout: float) -> str:
        return self._client.address_of(label, index, name, timeout)

    def request_stop(self) -> None:
        self._client.request_stop()

    def wait_for_stop(self) -> None:
        """Returns when the program stops; raises if the controller is gone."""
        self._client.wait_for_stop()

    def wait_for_end(self) -> None:
        """Returns when the controller has ended every node; raises if it is gone."""
        self._client.wait_for_end()


def _watch_for_stop(controller: ControllerClient, node_context: context.NodeContext,
                    grace: float) -> None:
    """Tells the node when the program stops; ends this process if it outlives its program.

    The controller ends every node process it started by the end of its stop sequence; a
    process still alive once the controller is done - or gone, its launching process killed -
    has been missed, and exits by itself when the grace period is over: nothing is orphaned.
    """
    with contextlib.suppress(Exception):  # an error means the controller is gone
        controller.wait_for_stop()
    stopped_at = time.monotonic()
    node_context.notify_stop()
    with contextlib.suppress(Exception):
        controller.wait_for_end()
    time.sleep(max(0.0, grace - (time.monotonic() - stopped_at)))
    with contextlib.suppress(OSError, ValueError):  # the output may have gone with the launcher
        print(f"launchpad: node {node_context.name}: its program has ended; exiting",
              file=sys.stderr, flush=True)
    exit_process(EXIT_ORPHANED)


def make_context(spec: WorkerSpec, controller: ControllerClient) -> context.NodeContext:
    return context.NodeContext(
        program_name=spec.program_name, label=spec.label, index=spec.index,
        controller_address=spec.controller_address, token=spec.token, addresses=controller,
        request_stop=controller.request_stop,
        process_starter=process.ChildProcessStarter(spec.run_dir, spec.termination_notice_secs,
                                                    in_worker=True),
        termination_notice_secs=spec.termination_notice_secs)


def run_worker(spec: WorkerSpec) -> int:
    """Runs the node of `spec` in this process; returns the exit code for it."""
    for entry in reversed(spec.sys_path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    os.environ.update(spec.env)
    if spec.argv:
        sys.argv[:] = spec.argv
    process_tree.adopt_orphans()  # what the node starts is found, and ended, at its exit
    controller = ControllerClient(spec.controller_address, spec.token)
    node_context = make_context(spec, controller)
    context.add_process_context(node_context)
    context.enter(node_context)
    threading.Thread(target=_watch_for_stop, name="lp-stop-watcher", daemon=True,
                     args=(controller, node_context, spec.termination_notice_secs)).start()
    try:
        node: Any = cloudpickle.loads(spec.node)
        _start_absl(spec.argv)
        node.run()
    except BaseException as e:  # noqa: BLE001 - reported to the launcher, whatever it is
        _write_report(spec.report_path, e)
        if node_context.stop_event.is_set():
            # Most likely a consequence of the stop (a node it called has ended): one line,
            # the launcher logs it as a failure during the stop; the report has the traceback.
            print(f"launchpad: node {node_context.name} raised while its program stopped: "
                  f"{type(e).__name__}: {e}", file=sys.stderr, flush=True)
        else:
            traceback.print_exc()
        return EXIT_NODE_RAISED
    return 0


def _start_absl(argv: list[str]) -> None:
    """What `absl.app.run` does for a script, done for the node, as Launchpad's node processes
    did: its absl flags are parsed from its arguments (its code is imported by now, so its
    flags are defined; others are left alone), and absl logging goes to stderr at the flags'
    verbosity, INFO by default, so a node's `logging.info` shows as under local_mt."""
    if not flags.FLAGS.is_parsed():
        flags.FLAGS(argv or [sys.argv[0]], known_only=True)
        if flags.FLAGS["verbosity"].using_default_value:
            flags.FLAGS.verbosity = 0  # INFO, as app.run sets it
    absl_logging.use_absl_handler()


def exit_process(code: int) -> None:
    """Ends the process now: a node is done when its code returns, whatever threads it left
    (the same as under local_mt), and whatever processes it started end with it
    (process_tree.py); output is flushed first."""
    process_tree.end_descendants()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m launchpad.launch.worker",
                                     description="Runs one node of a launchpad program.")
    parser.add_argument("--spec", required=True, help="the WorkerSpec file of the node")
    args = parser.parse_args(argv)
    exit_process(run_worker(process.read_spec(args.spec)))


if __name__ == "__main__":
    main()
