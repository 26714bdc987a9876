"""A Slurm launch's steps: a program is one Slurm job; each host of it runs one step,
its host agent.

    lp.launch(program, launch_type="slurm",
              resources={"learner": lp.Resources(cpus=4, gpus=1), "actor": lp.Resources()},
              slurm=lp.SlurmSettings(partition="gpu", time_limit="2:00:00"))

    place   -> the Placement (slurm/placement.py): every node on a host slot of a component,
               packed against the partition's hosts (sinfo); a layout that cannot fit is
               refused with the numbers, and --lp_dry_run shows it and stops there
    sbatch  -> one allocation (slurm/job.py): one component, or one per kind of group (a
               heterogeneous job); its batch step is the job holder (job_holder.py), which
               ends the job if the launching process dies. While it pends, its state and
               Slurm's reason are printed and are the program's status
    running -> each host: one step, its host agent (`srun --jobid=J [--het-group=G] -w
               HOST --exact -n1 -c SHARE ... --agent`, slurm/agents.py, host_agent.py),
               which forks each node placed there from a fork server - the runner on its
               spec file, in the run folder of the shared filesystem - binds it to its
               share of the host's CPUs and GPUs (slot_binding.py), passes its output
               back, and sends the controller one heartbeat and one telemetry report per
               host and period
    its end -> `stop_before_end_secs` before the time limit the program stops gracefully, by
               Slurm's SIGUSR1 or the controller's own clock (time_limit.py)
    a host lost -> the job goes on (`--no-kill`); a node of that host restarted by its
               group's policy starts on another host with room (node_hosts.py)
    stop    -> the same as under local_mp (stop event, grace, SIGTERM, SIGKILL, each to the
               node's process group through its agent), then the agents end, then `scancel`
               of the job: it never outlives its program
               (a SIGTERM or SIGHUP of the launching process stops it as Ctrl+C does)

The controller stays in the launching process (a login node), listening on the address the
cluster's hosts reach it at; nodes bind the interface through which their host reaches the
controller, and advertise it. Nodes run with the launching interpreter and `sys.path` (the
Slurm convention of a shared filesystem). Node output comes back through srun to the
launch's terminal (prefixed lines) and is kept in a log per node in the run folder.
"""

from __future__ import annotations

import dataclasses
import os
import re
import socket
from collections.abc import Callable

from launchpad.launch.runtime import resources as resources_lib
from launchpad.launch.runtime import run_records, spec, terminals
from launchpad.launch.runtime.controller import Controller
from launchpad.launch.runtime.launcher import LaunchOptions
from launchpad.launch.runtime.process import NodeProcess, PythonProcess
from launchpad.launch.runtime.terminals import NodeOutput
from launchpad.launch.slurm import agents as slurm_agents
from launchpad.launch.slurm import inventory as slurm_inventory
from launchpad.launch.slurm import job as slurm_job
from launchpad.launch.slurm import time_limit
from launchpad.launch.slurm.errors import SlurmError
from launchpad.launch.slurm.host_room import HostRoom
from launchpad.launch.slurm.job import SlurmJob, run
from launchpad.launch.slurm.node_hosts import NodeOnHost
from launchpad.launch.slurm.placement import Placement, place
from launchpad.launch.slurm.settings import SlurmSettings
from launchpad.program import Program

COMMANDS = ("sbatch", "srun", "scancel", "squeue", "scontrol", "sinfo")


def slurmctld_address() -> str:
    config = run(["scontrol", "show", "config"]).stdout
    found = re.search(r"^SlurmctldHost\[0\]\s*=\s*([^\s(]+)(?:\(([^)]+)\))?", config, re.M)
    if found is None:
        raise SlurmError("Cannot find SlurmctldHost in `scontrol show config`; give "
                         "lp.SlurmSettings(controller_host=...)")
    name, addr = found.groups()
    return addr or socket.gethostbyname(name)


def placement_of(program: Program, resources: dict | None,
                 settings: SlurmSettings) -> Placement:
    """Where every node of `program` goes, against the cluster's hosts now.

    Raises:
      SlurmError: it cannot fit the partition (the message has the numbers).
    """
    needs = resources_lib.per_group(list(program.groups), program.name, resources)
    nodes = [(node.name, node.label, needs[node.label]) for node in program.get_all_nodes()]
    spare = _room_to_grow(program, settings.max_nodes)
    nodes += [(name, name.rpartition("/")[0], needs[name.rpartition("/")[0]])
              for name in spare]
    inventory = slurm_inventory.read(lambda argv: run(argv).stdout)
    return place(program.name, nodes, inventory, settings.partition, settings.components,
                 frozenset(spare))


def _room_to_grow(program: Program, max_nodes: dict[str, int]) -> list[str]:
    """The names of the nodes each group may grow to (SlurmSettings.max_nodes) and has not.

    Raises:
      ValueError: a group the program does not have, or one that has more nodes already.
    """
    spare = []
    for group, most in max_nodes.items():
        if group not in program.groups:
            raise ValueError(f"SlurmSettings.max_nodes names group {group!r}, which program "
                             f"{program.name!r} does not have; its groups: "
                             f"{sorted(program.groups)}")
        size = len(program.groups[group])
        if most < size:
            raise ValueError(f"SlurmSettings.max_nodes[{group!r}] is {most}, and the group "
                             f"has {size} nodes already")
        spare += [f"{group}/{index}" for index in range(size, most)]
    return spare


def sbatch_argv(placement: Placement, settings: SlurmSettings, run_dir: str,
                batch_step: list[str]) -> list[str]:
    """The job's `sbatch` request: the placement's components with the settings'
    options, its output in the run folder."""
    return placement.sbatch_argv(
        [f"--job-name=lp-{placement.program}",
         f"--output={os.path.join(run_dir, 'slurm-%j.out')}",
         "--no-kill"],  # a host lost is the program's to handle (node_hosts.py), not an end
        settings.sbatch_options(), batch_step)


def pending_reporter(controller: Controller) -> Callable[[str, str], None]:
    """What a job's wait says: printed when it changes (and once a minute), and kept as the
    program's status (`controller.pending`) until the job runs."""
    said = []

    def report(state: str, reason: str) -> None:
        if state == slurm_job.RUNNING:
            controller.set_pending("")
            return
        controller.set_pending(slurm_job.pending_text(state, reason))
        if not reason and not said:
            said.append(True)  # a job's first second: the scheduler has not looked yet
            return
        terminals.say(f"program {controller.program_name!r}: {controller.pending}")
    return report


def node_output(program: Program, options: LaunchOptions) -> NodeOutput:
    """The run folder on the shared filesystem (specs, agents' logs, a log per node: every
    terminal keeps the nodes' logs there), and the terminal."""
    settings = options.settings or SlurmSettings()
    run_dir = run_records.make(program.name, settings.run_dir)
    return NodeOutput(run_dir, terminals.make(options.terminal, program.name, run_dir,
                                              keep_logs=True), run_dir)


def start_nodes(program: Program, controller: Controller, job: SlurmJob,
                options: LaunchOptions, output: NodeOutput) -> None:
    """Starts the nodes of `program` under `controller` once `job` runs, each on its host
    slot through that host's agent (one srun step per host), writing to `output`; the
    agents and the job end when the program does. A group that grows while the program runs
    takes room on its component's hosts (host_room.py)."""
    settings = options.settings or SlurmSettings()
    run_dir, term = output.folder, output.terminal
    placement = job.placement
    agent_spec = slurm_agents.write_agent_spec(run_dir, "hosts", controller)
    agents = {(g, h): slurm_agents.HostAgent(job, g, h, component, agent_spec,
                                             os.path.join(run_dir, f"agent.{g}.{h}.log"))
              for g, component in enumerate(placement.components)
              for h in range(component.hosts)}
    room = HostRoom(placement, job.job_id)
    needs = resources_lib.per_group(list(program.groups), program.name, options.resources)

    def finish() -> None:
        for agent in agents.values():
            agent.close()
        job.cancel()
        term.close()

    stop_signals = time_limit.stop_signals(settings.stop_before_end_secs)

    def start(nodes: list) -> None:
        node_processes = []
        for node in nodes:
            given = options.local_resources.get(node.label) or PythonProcess()
            node_settings = dataclasses.replace(given, env={**(given.env or {}),
                                                            **room.env(node.name)})
            node_spec = spec.make_cluster_spec(node, controller, node_settings,
                                               options.bind_address, stop_signals,
                                               failure_shown_by_launcher=term.shows_output)
            node_process = NodeProcess(
                node.name, spec.write_spec_file(node_spec, run_dir), given,
                NodeOnHost(node.name, room, agents), lambda name=node.name: term.open(name),
                on_exit=controller.worker_ended, imports=node.heavy_imports())
            controller.add_worker(node_process)
            node_processes.append(node_process)
        for node_process in node_processes:
            node_process.start()

    def grow(nodes: list) -> None:
        room.take(nodes[0].label, [node.name for node in nodes], needs[nodes[0].label])
        try:
            start(nodes)
        except BaseException:
            room.free([node.name for node in nodes])
            raise

    # A job still pending when the program stops is cancelled at once: its steps never run.
    controller.launcher_context.add_stop_handler(
        lambda: None if job.running else job.cancel())
    controller.on_finish(finish)
    time_limit.keep_the_clock(job, controller, settings.stop_before_end_secs)
    start(program.get_all_nodes())
    controller.scaling.start_nodes = grow
    controller.scaling.nodes_removed = room.free
