"""slurm: a program is one Slurm job, each node one job step.

    lp.launch(program, launch_type="slurm",
              resources={"learner": lp.Resources(cpus=4, gpus=1), "actor": lp.Resources()},
              slurm=lp.SlurmSettings(partition="gpu", time_limit="2:00:00"))

    place   -> the Placement (slurm_placement.py): every node on a host slot of a component,
               packed against the partition's hosts (sinfo); a layout that cannot fit is
               refused with the numbers, and --lp_dry_run shows it and stops there
    sbatch  -> one allocation (slurm_job.py): one component, or one per kind of group (a
               heterogeneous job); its batch step is the job holder (job_holder.py), which
               ends the job if the launching process dies. While it pends, its state and
               Slurm's reason are printed and are the program's status
    running -> each node: srun --jobid=J [--het-group=G] -w HOST --exact -n1 -c CPUS ...
               runner (`python -m launchpad.launch --spec`) on its spec file, in the run
               folder of the shared filesystem
    stop    -> the same as under local_mp (stop event, grace, SIGTERM to srun, which passes it
               to the step, SIGKILL), then `scancel` of the job: it never outlives its program
               (a SIGTERM or SIGHUP of the launching process stops it as Ctrl+C does)

The controller stays in the launching process (a login node), listening on the address the
cluster's hosts reach it at; nodes bind the interface through which their host reaches the
controller, and advertise it. Nodes run with the launching interpreter and `sys.path` (the
Slurm convention of a shared filesystem). Node output comes back through srun to the
launch's terminal (prefixed lines) and is kept in a log per node in the run folder.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from launchpad import address
from launchpad.launch import job_holder, run_records, slurm_inventory, slurm_job, spec, terminals
from launchpad.launch import resources as resources_lib
from launchpad.launch.controller import Controller
from launchpad.launch.errors import LaunchError, SlurmError
from launchpad.launch.process import NodeProcess, PythonProcess, Stdio, own_process_group
from launchpad.launch.resources import Resources
from launchpad.launch.slurm_job import SlurmJob, environment, run
from launchpad.launch.slurm_placement import Placement, place
from launchpad.launch.slurm_settings import SlurmSettings
from launchpad.program import Program

_COMMANDS = ("sbatch", "srun", "scancel", "squeue", "scontrol", "sinfo")


def validate(*, slurm: SlurmSettings | None, local_resources: dict | None,
             terminal: str | None, **unused: Any) -> None:
    if slurm is not None and not isinstance(slurm, SlurmSettings):
        raise TypeError(f"slurm must be an lp.SlurmSettings, got {slurm!r}")
    missing = [c for c in _COMMANDS if shutil.which(c) is None]
    if missing:
        raise LaunchError(f"launch_type='slurm' needs Slurm's client commands, and "
                          f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not "
                          "on PATH: run the launch where Slurm is installed (a login node)")
    for group, settings in (local_resources or {}).items():
        if not isinstance(settings, PythonProcess) or settings.interpreter_args:
            raise TypeError(f"local_resources[{group!r}] under slurm must be an "
                            "lp.PythonProcess with args, env or interpreter (its nodes' "
                            "steps run that interpreter, without interpreter_args)")
    if terminals.choose(terminal) == terminals.TMUX_SESSION:
        raise ValueError("terminal='tmux_session' is not available under slurm; use "
                         "'current_terminal' or 'output_to_files'")


def controller_host(*, slurm: SlurmSettings | None, **unused: Any) -> str:
    """Where the cluster's hosts reach the controller: this host's address on the route to
    slurmctld, unless the settings say."""
    settings = slurm or SlurmSettings()
    if settings.controller_host:
        return settings.controller_host
    return address.routed_host(slurmctld_address())


def slurmctld_address() -> str:
    config = run(["scontrol", "show", "config"]).stdout
    found = re.search(r"^SlurmctldHost\[0\]\s*=\s*([^\s(]+)(?:\(([^)]+)\))?", config, re.M)
    if found is None:
        raise SlurmError("Cannot find SlurmctldHost in `scontrol show config`; give "
                         "lp.SlurmSettings(controller_host=...)")
    name, addr = found.groups()
    return addr or socket.gethostbyname(name)


def _step_options(needs: Resources) -> list[str]:
    options = [f"--cpus-per-task={needs.cpus}"]
    if needs.gpus:
        options.append(f"--gpus-per-task={needs.gpus}")
    if needs.memory_mb is not None:
        options.append(f"--mem={needs.memory_mb}M")
    return options


class SrunSpawner:
    """Starts a node's runner as a step of the job on its slot's host (a process.Spawner),
    once the job runs."""

    def __init__(self, job: SlurmJob, node: str):
        self._job = job
        self._slot = job.placement.slot_of(node)

    def spawn(self, spec_path: str, settings: PythonProcess, stdio: Stdio, own_group: bool,
              on_exit: Callable[[int], None]) -> concurrent.futures.Future:
        slot = self._slot
        het = [f"--het-group={slot.component}"] if self._job.placement.heterogeneous else []
        name = os.path.basename(spec_path).removesuffix(".spec")
        stdio = tuple(os.dup(fd) for fd in stdio)  # ours until the job runs
        started: concurrent.futures.Future = concurrent.futures.Future()

        def start() -> None:
            try:
                self._job.wait_running()
                host = self._job.hosts(slot.component)[slot.host]
                argv = ["srun", f"--jobid={self._job.job_id}", *het, f"--nodelist={host}",
                        "--exact", "--nodes=1", "--ntasks=1", *_step_options(slot.needs),
                        f"--job-name={name}", "--kill-on-bad-exit=0", "--",
                        settings.interpreter or sys.executable, "-m", "launchpad.launch",
                        "--spec", spec_path]
                popen = subprocess.Popen(argv, env=environment(settings.env),
                                         stdin=stdio[0], stdout=stdio[1], stderr=stdio[2],
                                         **(own_process_group() if own_group else {}))
            except Exception as e:  # noqa: BLE001 - the future carries it to the node
                started.set_exception(e)
                return
            finally:
                for fd in set(stdio):
                    os.close(fd)
            started.set_result(popen.pid)
            on_exit(_as_local_exit(popen.wait()))

        threading.Thread(target=start, daemon=True, name=f"lp-srun-{name}").start()
        return started


def _as_local_exit(code: int) -> int:
    """srun's exit status as a process of this host's: srun reports a task killed by signal
    N as 128 + N (its documented convention), a process here as -N."""
    return -(code - 128) if 128 < code <= 128 + 64 else code


def placement_of(program: Program, resources: dict | None,
                 settings: SlurmSettings) -> Placement:
    """Where every node of `program` goes, against the cluster's hosts now.

    Raises:
      SlurmError: it cannot fit the partition (the message has the numbers).
    """
    needs = resources_lib.per_group(list(program.groups), program.name, resources)
    nodes = [(node.name, node.label, needs[node.label]) for node in program.get_all_nodes()]
    inventory = slurm_inventory.read(lambda argv: run(argv).stdout)
    return place(program.name, nodes, inventory, settings.partition, settings.components)


def sbatch_argv(placement: Placement, settings: SlurmSettings, run_dir: str,
                batch_step: list[str]) -> list[str]:
    """The job's `sbatch` request: the placement's components with the settings'
    options, its output in the run folder."""
    return placement.sbatch_argv(
        [f"--job-name=lp-{placement.program}",
         f"--output={os.path.join(run_dir, 'slurm-%j.out')}"],
        settings.sbatch_options(), batch_step)


def dry_run(program: Program, *, resources: dict | None, slurm: SlurmSettings | None,
            **unused: Any) -> str:
    """What a launch would submit: each node's host slot, and the sbatch request."""
    settings = slurm or SlurmSettings()
    placement = placement_of(program, resources, settings)
    return placement.describe(sbatch_argv(placement, settings, "RUN_DIR",
                                          ["python", "-m", "launchpad.launch", "..."]))


def pending_reporter(controller: Controller) -> Callable[[str, str], None]:
    """What a job's wait says: printed when it changes (and once a minute), and kept as the
    program's status (`controller.pending`) until the job runs."""
    def report(state: str, reason: str) -> None:
        if state == slurm_job.RUNNING:
            controller.pending = ""
            return
        why = reason or "not yet scheduled"
        controller.pending = f"Slurm job {state.lower()} ({why})"
        try:
            print(f"launchpad: program {controller.program_name!r}: its Slurm job is "
                  f"{state.lower()} ({why})", file=sys.stderr, flush=True)
        except OSError:
            pass  # a terminal gone (SIGHUP): the status still says it
    return report


def _stop_signals(settings: SlurmSettings) -> dict[str, str]:
    if not settings.stop_before_end_secs:
        return {}
    return {"SIGUSR1": "Slurm warned that the job ends soon (its time limit is at most "
                       f"{settings.stop_before_end_secs}s away, or it is being preempted)"}


def launch(program: Program, controller: Controller, *, resources: dict | None,
           slurm: SlurmSettings | None, local_resources: dict | None, terminal: str | None,
           bind_address: str | None, **unused: Any) -> None:
    """Submits `program` as one Slurm job and starts a step per node once it runs."""
    settings = slurm or SlurmSettings()
    placement = placement_of(program, resources, settings)
    run_dir = run_records.make(program.name, settings.run_dir)
    holder = os.path.join(run_dir, "job.holder")
    job_holder.write(holder, job_holder.HolderSpec(
        controller.address, controller.token, controller.tls,
        controller.liveness_timeout_secs))
    argv = sbatch_argv(placement, settings, run_dir,
                       [sys.executable, "-m", "launchpad.launch", "--hold", holder])
    controller.pending = "Slurm job submitted"
    job = SlurmJob.submit(placement, argv, on_pending=pending_reporter(controller),
                          pending_timeout_secs=settings.pending_timeout_secs)
    start_nodes(program, controller, job, settings, run_dir, terminal=terminal,
                local_resources=local_resources, bind_address=bind_address)


def start_nodes(program: Program, controller: Controller, job: SlurmJob,
                settings: SlurmSettings, run_dir: str, *, terminal: str | None,
                local_resources: dict | None, bind_address: str | None) -> None:
    """Starts a step of `job` per node of `program` under `controller`, each on its host
    slot, once the job runs; the job is cancelled when the program ends."""
    term = terminals.make(terminals.choose(terminal), program.name, run_dir, keep_logs=True)
    controller.log_dir = run_dir  # every terminal keeps the nodes' logs there
    controller.node_output = term
    # A job still pending when the program stops is cancelled at once: its steps never run.
    controller.launcher_context.add_stop_handler(
        lambda: None if job.running else job.cancel())
    controller.on_finish(lambda: (job.cancel(), term.close()))
    node_processes = []
    for node in program.get_all_nodes():
        node_settings = (local_resources or {}).get(node.label) or PythonProcess()
        node_spec = spec.make_cluster_spec(node, controller, node_settings, bind_address,
                                           _stop_signals(settings))
        node_process = NodeProcess(
            node.name, spec.write_spec_file(node_spec, run_dir), node_settings,
            SrunSpawner(job, node.name), lambda name=node.name: term.open(name),
            on_exit=controller.worker_ended)
        controller.add_worker(node_process)
        node_processes.append(node_process)
    for node_process in node_processes:
        node_process.start()
