"""local_mp: every node of the program is a process of its own on this host.

Each node runs in the node runner (launch/node_process/runner.py), started from its spec
file by a fork of the launch's fork server (the core already imported: milliseconds per
node) or, for groups whose `PythonProcess` asks for their own interpreter, by a fresh
interpreter. Each process leads a
process group, so stopping ends whatever a node started, and a terminal's Ctrl+C reaches only
the launcher. A node whose process exits non-zero or is killed fails the program, named with
its exit code or signal and, when it raised, its traceback.
"""

from __future__ import annotations

import datetime
import os
import shutil
from typing import Any

from launchpad.launch.node_process import fork_server
from launchpad.launch.runtime import private_files, spec, terminals
from launchpad.launch.runtime.controller import Controller
from launchpad.launch.runtime.process import NodeProcess
from launchpad.nodes.python.local_multi_processing import PythonProcess
from launchpad.program import Program


def validate(*, local_resources: dict | None, terminal: str | None, **unused: Any) -> None:
    for group, settings in (local_resources or {}).items():
        # An empty value (None, [], {}) stands for the defaults, as in Launchpad.
        if settings and not isinstance(settings, PythonProcess):
            raise TypeError(f"local_resources[{group!r}] must be an lp.PythonProcess (or "
                            f"empty, for the defaults), got {settings!r}")
    terminals.choose(terminal)


def make_run_dir(program_name: str) -> str:
    """A private folder for the launch's node specs and logs:
    <tmp>/launchpad-runs-<uid>/NAME-TIME-* (see private_files.py)."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in program_name)
    return private_files.make_private_dir(f"{safe}-{stamp}-")


def _clean_up(run_dir: str, terminal: terminals.Terminal, spawner: fork_server.ForkServer,
              keep_logs: bool) -> None:
    terminal.close()
    spawner.close()
    for name in os.listdir(run_dir):
        if name.endswith(".spec") or (name.endswith(".log") and not keep_logs):
            os.unlink(os.path.join(run_dir, name))
    if not os.listdir(run_dir):
        shutil.rmtree(run_dir, ignore_errors=True)


def launch(program: Program, controller: Controller, *, local_resources: dict | None,
           terminal: str | None, bind_address: str | None = None, **unused: Any) -> None:
    """Starts one process per node of `program` under `controller`."""
    run_dir = make_run_dir(program.name)
    chosen = terminals.choose(terminal)
    # current_terminal copies each node's output to its log too, so that `launchpad logs`
    # can read it while the program runs; the copies go with the program (the terminal
    # showed them), the logs of output_to_files stay.
    term = terminals.make(chosen, program.name, run_dir, keep_logs=True)
    kept = chosen == terminals.OUTPUT_TO_FILES
    controller.log_dir = run_dir if kept else None
    controller.node_output = term
    spawner = fork_server.ForkServer()
    controller.on_finish(lambda: _clean_up(run_dir, term, spawner, kept))
    launcher_context = controller.launcher_context
    node_processes = []
    for node in program.get_all_nodes():
        settings = (local_resources or {}).get(node.label) or PythonProcess()
        node_spec = spec.make_spec(
            node, launcher_context, node.label, node.index,
            termination_notice_secs=controller.termination_notice_secs,
            liveness_timeout_secs=controller.liveness_timeout_secs,
            bind_host=bind_address or spec.LOOPBACK, argv=settings.argv(), env=settings.env)
        node_process = NodeProcess(
            node.name, spec.write_spec_file(node_spec, run_dir), settings, spawner,
            lambda name=node.name: term.open(name), on_exit=controller.worker_ended)
        controller.add_worker(node_process)
        node_processes.append(node_process)
    for node_process in node_processes:
        node_process.start()
