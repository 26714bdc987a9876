"""slurm: a program is one Slurm job, each node one job step.

    lp.launch(program, launch_type="slurm",
              resources={"learner": lp.Resources(cpus=4, gpus=1), "actor": lp.Resources()},
              slurm=lp.SlurmSettings(partition="gpu", time_limit="2:00:00"))

    sbatch  -> one allocation: a component per distinct lp.Resources (a heterogeneous job
               when groups need different ones; Slurm gives each component nodes of its
               own); its batch step is the job holder (job_holder.py), which ends the job
               if the launching process dies
    running -> each node: srun --jobid=J [--het-group=G] --exact -n1 -c CPUS ... runner
               (`python -m launchpad.launch --spec`) on its spec file, in the run folder of
               the shared filesystem
    stop    -> the same as under local_mp (stop event, grace, SIGTERM to srun, which passes it
               to the step, SIGKILL), then `scancel` of the job: it never outlives its program

The controller stays in the launching process (a login node), listening on the address the
cluster's hosts reach it at; nodes bind the interface through which their host reaches the
controller, and advertise it. Nodes run with the launching interpreter and `sys.path` (the
Slurm convention of a shared filesystem). Node output comes back through srun to the
launch's terminal (prefixed lines) and is kept in a log per node in the run folder.
"""

from __future__ import annotations

import concurrent.futures
import math
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from absl import logging

import launchpad
from launchpad import address
from launchpad.launch import job_holder, run_records, spec, terminals
from launchpad.launch import resources as resources_lib
from launchpad.launch.controller import Controller
from launchpad.launch.errors import LaunchError, SlurmError
from launchpad.launch.process import NodeProcess, PythonProcess, Stdio, own_process_group
from launchpad.launch.resources import Resources
from launchpad.launch.slurm_settings import SlurmSettings
from launchpad.program import Program

_COMMANDS = ("sbatch", "srun", "scancel", "squeue", "scontrol", "sinfo")
_POLL_SECS = 0.2  # how often a pending job's state is read (Slurm has no event for it)
_RUNNING = "RUNNING"
_WAITING = ("PENDING", "CONFIGURING", "REQUEUED", "RESIZING")
_LIVE = {_RUNNING, "COMPLETING", "SUSPENDED", "STOPPED", *_WAITING}  # the job is not over
_END_TIMEOUT_SECS = 30.0


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
    config = _run(["scontrol", "show", "config"]).stdout
    found = re.search(r"^SlurmctldHost\[0\]\s*=\s*([^\s(]+)(?:\(([^)]+)\))?", config, re.M)
    if found is None:
        raise SlurmError("Cannot find SlurmctldHost in `scontrol show config`; give "
                         "lp.SlurmSettings(controller_host=...)")
    name, addr = found.groups()
    return addr or socket.gethostbyname(name)


def _environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The launching environment, where `import launchpad` finds this launchpad."""
    source = os.path.dirname(os.path.dirname(os.path.abspath(launchpad.__file__)))
    path = os.pathsep.join(p for p in (source, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, **(extra or {})}


def _run(argv: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, env=_environment())
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SlurmError(f"`{' '.join(argv[:3])} ...` failed: {e}") from e
    if done.returncode != 0:
        raise SlurmError(f"`{' '.join(argv[:3])} ...` failed (exit {done.returncode}): "
                         f"{done.stderr.strip() or done.stdout.strip()}")
    return done


def _resource_options(needs: Resources) -> list[str]:
    options = [f"--cpus-per-task={needs.cpus}"]
    if needs.gpus:
        options.append(f"--gpus-per-task={needs.gpus}")
    if needs.memory_mb is not None:
        options.append(f"--mem-per-cpu={math.ceil(needs.memory_mb / needs.cpus)}M")
    return options + [f"--{key}={value}" for key, value in needs.extra.items()]


def _check_possible(sbatch: list[str], components: int, partition: str | None) -> None:
    """Refuses, before submitting, a job Slurm could never run (it would pend for ever).

    Raises:
      SlurmError: with Slurm's own reason.
    """
    _run(["sbatch", "--test-only", *sbatch[2:]])
    if components > 1:  # --test-only misses it: each component needs nodes of its own
        nodes = _run(["sinfo", "-h", "-o", "%D", *([f"--partition={partition}"]
                                                   if partition else [])]).stdout.split()
        available = sum(int(n) for n in nodes)
        if components > available:
            raise SlurmError(
                f"The groups ask for {components} different lp.Resources, so the job is "
                f"heterogeneous with {components} components, and Slurm gives each component "
                f"nodes of its own; the partition has {available}. Give groups the same "
                "lp.Resources, or use a larger partition")


class SlurmJob:
    """The program's allocation: `submit()`ted at launch (or the job this process runs in),
    cancelled when the program ends."""

    def __init__(self, job_id: str, components: list[tuple[Resources, int]],
                 running: bool = False, ends_with_this_process: bool = False):
        self.job_id = job_id
        self.components = components
        self._lock = threading.Lock()
        self._started = threading.Event()
        self._ended = ends_with_this_process  # a batch step's own job: never cancelled here
        self.error: str = ""
        if running:
            self._started.set()
        else:
            threading.Thread(target=self._wait_running, name=f"lp-slurm-{job_id}",
                             daemon=True).start()

    @classmethod
    def submit(cls, program_name: str, components: list[tuple[Resources, int]],
               settings: SlurmSettings, run_dir: str, batch_step: list[str]) -> SlurmJob:
        """Submits the job, its batch step running `batch_step`.

        Raises:
          SlurmError: Slurm refused it, or could never run it (with Slurm's reason).
        """
        job_wide = [f"--job-name=lp-{program_name}",
                    f"--output={os.path.join(run_dir, 'slurm-%j.out')}",
                    *settings.sbatch_options()]
        argv = ["sbatch", "--parsable"]
        for g, (needs, count) in enumerate(components):
            argv += [":"] if g else job_wide
            argv += [f"--ntasks={count}", *_resource_options(needs)]
        argv += ["--wrap", shlex.join(["exec", *batch_step])]
        _check_possible(argv, len(components), settings.partition)
        job = cls(_run(argv).stdout.strip().split(";")[0], components)
        logging.info("Program %s is Slurm job %s", program_name, job.job_id)
        return job

    def _wait_running(self) -> None:
        while not self._started.is_set():
            states = self._states()
            if states == {_RUNNING}:
                self._started.set()
            elif not states or not states <= {_RUNNING, *_WAITING}:
                self.error = (f"Slurm job {self.job_id} ended before it ran "
                              f"(state {', '.join(sorted(states)) or 'gone'})")
                self._started.set()
            else:
                self._started.wait(_POLL_SECS)

    @property
    def running(self) -> bool:
        return self._started.is_set() and not self.error

    def wait_running(self) -> None:
        """Returns once the job runs. Raises: SlurmError if it ended or was cancelled."""
        self._started.wait()
        if self.error:
            raise SlurmError(self.error)

    def cancel(self) -> None:
        """Ends the job (and so every step left of it); safe to call more than once."""
        with self._lock:
            if self._ended:
                return
            self._ended = True
        if not self._started.is_set():
            self.error = f"Slurm job {self.job_id} was cancelled before it ran"
            self._started.set()
        try:
            _run(["scancel", self.job_id])
        except SlurmError as e:
            logging.warning("Cancelling Slurm job %s failed: %s", self.job_id, e)
            return
        deadline = time.monotonic() + _END_TIMEOUT_SECS
        while self._states() & _LIVE and time.monotonic() < deadline:
            time.sleep(_POLL_SECS)  # Slurm has no event for a job's end either
        if self._states() & _LIVE:
            logging.warning("Slurm job %s still runs %gs after scancel", self.job_id,
                            _END_TIMEOUT_SECS)

    def alive(self) -> bool:
        """Whether the job is pending or running (not over)."""
        return bool(self._states() & _LIVE)

    def _states(self) -> set[str]:
        try:
            return set(_run(["squeue", "-h", "-j", self.job_id, "-o", "%T"]).stdout.split())
        except SlurmError:
            return set()  # squeue forgets ended jobs (and then refuses the id)


class SrunSpawner:
    """Starts a node's runner as a step of the job (a process.Spawner), once the job runs."""

    def __init__(self, job: SlurmJob, component: int):
        self._job = job
        self._component = component

    def spawn(self, spec_path: str, settings: PythonProcess, stdio: Stdio, own_group: bool,
              on_exit: Callable[[int], None]) -> concurrent.futures.Future:
        needs = self._job.components[self._component][0]
        het = ([f"--het-group={self._component}"] if len(self._job.components) > 1 else [])
        name = os.path.basename(spec_path).removesuffix(".spec")
        argv = ["srun", f"--jobid={self._job.job_id}", *het, "--exact", "--nodes=1",
                "--ntasks=1", *_resource_options(needs), f"--job-name={name}",
                "--kill-on-bad-exit=0", "--", settings.interpreter or sys.executable,
                "-m", "launchpad.launch", "--spec", spec_path]
        stdio = tuple(os.dup(fd) for fd in stdio)  # ours until the job runs
        started: concurrent.futures.Future = concurrent.futures.Future()

        def start() -> None:
            try:
                self._job.wait_running()
                popen = subprocess.Popen(argv, env=_environment(settings.env),
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


def components_of(program: Program, needs: dict[str, Resources]) -> list[tuple[Resources, int]]:
    """One (Resources, node count) per distinct Resources, in the program's order."""
    counts: dict[Resources, int] = {}
    for node in program.get_all_nodes():
        counts[needs[node.label]] = counts.get(needs[node.label], 0) + 1
    return list(counts.items())


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
    needs = resources_lib.per_group(list(program.groups), program.name, resources)
    run_dir = run_records.make(program.name, settings.run_dir)
    holder = os.path.join(run_dir, "job.holder")
    job_holder.write(holder, job_holder.HolderSpec(
        controller.address, controller.token, controller.tls,
        controller.liveness_timeout_secs))
    job = SlurmJob.submit(program.name, components_of(program, needs), settings, run_dir,
                          [sys.executable, "-m", "launchpad.launch", "--hold", holder])
    start_nodes(program, controller, job, needs, settings, run_dir, terminal=terminal,
                local_resources=local_resources, bind_address=bind_address)


def start_nodes(program: Program, controller: Controller, job: SlurmJob,
                needs: dict[str, Resources], settings: SlurmSettings, run_dir: str, *,
                terminal: str | None, local_resources: dict | None,
                bind_address: str | None) -> None:
    """Starts a step of `job` per node of `program` under `controller`, once the job runs;
    the job is cancelled when the program ends."""
    term = terminals.make(terminals.choose(terminal), program.name, run_dir, keep_logs=True)
    controller.log_dir = run_dir  # every terminal keeps the nodes' logs there
    controller.node_output = term
    # A job still pending when the program stops is cancelled at once: its steps never run.
    controller.launcher_context.add_stop_handler(
        lambda: None if job.running else job.cancel())
    controller.on_finish(lambda: (job.cancel(), term.close()))
    spawners = {needs: SrunSpawner(job, g) for g, (needs, _) in enumerate(job.components)}
    node_processes = []
    for node in program.get_all_nodes():
        node_settings = (local_resources or {}).get(node.label) or PythonProcess()
        node_spec = spec.make_cluster_spec(node, controller, node_settings, bind_address,
                                           _stop_signals(settings))
        node_process = NodeProcess(
            node.name, spec.write_spec_file(node_spec, run_dir), node_settings,
            spawners[needs[node.label]], lambda name=node.name: term.open(name),
            on_exit=controller.worker_ended)
        controller.add_worker(node_process)
        node_processes.append(node_process)
    for node_process in node_processes:
        node_process.start()
