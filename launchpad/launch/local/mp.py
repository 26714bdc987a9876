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

import dataclasses
import datetime
import os
import shutil

from launchpad.launch.local import live_status
from launchpad.launch.node_process import fork_server
from launchpad.launch.runtime import private_files, spec, terminals
from launchpad.launch.runtime.controller import Controller
from launchpad.launch.runtime.launcher import Launcher, LaunchOptions, Plan
from launchpad.launch.runtime.process import NodeProcess
from launchpad.launch.runtime.terminals import NodeOutput
from launchpad.nodes.python.local_multi_processing import PythonProcess
from launchpad.program import Program


def make_work_dir(program_name: str) -> str:
    """The launch's private work folder, for its node specs and logs:
    <tmp>/launchpad-work-<uid>/NAME-TIME-* (see private_files.py)."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in program_name)
    return private_files.make_work_dir(f"{safe}-{stamp}-")


def _clean_up(output: NodeOutput, spawner: fork_server.ForkServer) -> None:
    output.terminal.close()
    spawner.close()
    work_dir = output.folder
    for name in os.listdir(work_dir):
        if name.endswith((".spec", ".log")):  # (output_to_files' files are elsewhere)
            os.unlink(os.path.join(work_dir, name))
    if not os.listdir(work_dir):
        shutil.rmtree(work_dir, ignore_errors=True)


class ProcessesLauncher(Launcher):
    """local_mp: every node a process of this host (see the module doc)."""

    name = "local_mp"
    where_nodes_run = "a process of this host"
    recorded = True
    live_status = True
    terminals = frozenset(terminals.TERMINALS)
    process_fields = frozenset(field.name for field in dataclasses.fields(PythonProcess))

    def prepare(self, program: Program, options: LaunchOptions) -> Plan:
        plan = super().prepare(program, options)
        if not options.starts_here:
            return plan
        return dataclasses.replace(plan, output=_node_output(program, options))

    def start(self, plan: Plan, controller: Controller) -> None:
        output, options = plan.output, plan.options
        spawner = fork_server.ForkServer()
        controller.on_finish(lambda: _clean_up(output, spawner))

        def start_nodes(nodes: list) -> None:
            node_processes = []
            for node in nodes:
                settings = options.local_resources.get(node.label) or PythonProcess()
                node_spec = spec.make_spec(
                    node, controller.launcher_context, node.label, node.index,
                    termination_notice_secs=controller.termination_notice_secs,
                    liveness_timeout_secs=controller.liveness_timeout_secs,
                    bind_host=options.bind_address or spec.LOOPBACK, argv=settings.argv(),
                    env=settings.env, state=controller.state_spec(node.label),
                    failure_shown_by_launcher=output.terminal.shows_output)
                node_process = NodeProcess(
                    node.name, spec.write_spec_file(node_spec, output.folder), settings,
                    spawner, lambda name=node.name: output.terminal.open(name),
                    on_exit=controller.worker_ended, imports=node.heavy_imports())
                controller.add_worker(node_process)
                node_processes.append(node_process)
            for node_process in node_processes:
                node_process.start()

        start_nodes(plan.program.get_all_nodes())
        controller.scaling.start_nodes = start_nodes
        if options.live_status:
            live_status.start(controller)


def _node_output(program: Program, options: LaunchOptions) -> NodeOutput:
    """Where the nodes of `program` write: a private run folder, and its terminal."""
    work_dir = make_work_dir(program.name)
    # current_terminal copies each node's output to its log too, so that `launchpad
    # logs` can read it while the program runs; the copies go with the program (the
    # terminal showed them). output_to_files writes where Launchpad's did (its logging
    # folder, output_files.py), and its files stay.
    try:
        term = terminals.make(options.terminal, program.name, work_dir, keep_logs=True,
                              nodes=[node.name for node in program.get_all_nodes()])
    except BaseException:
        shutil.rmtree(work_dir, ignore_errors=True)  # (nothing in it yet)
        raise
    kept = term.folder if isinstance(term, terminals.FilesTerminal) else None
    return NodeOutput(work_dir, term, kept)
