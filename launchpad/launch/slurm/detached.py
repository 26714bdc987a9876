"""Detached Slurm programs: the controller inside the job, so the program lives in the cluster.

    controller = lp.launch(program, launch_type="slurm", detach=True)   # returns at once
    run_id = controller.run_id
    ...                                      # the launching process may go
    lp.attach(run_id).stop()                 # later, from any process of the same user
                                             # (attach.py)

    the launching process                  the job's batch step, on a node of the job
      the launch's spec (a private file) -> python -m launchpad.launch --slurm-controller PATH:
      sbatch                                a Controller listening where the cluster's hosts
                                            reach it, starting a step per node (slurm/submission.py)
      SlurmRemoteController: stop() asks   <- controller.address (a private file)
        wait() reads how it ended        <- outcome (a private file): failure, stop reason
                                            then the batch step ends, and with it the job

The launching process may go (log out of the login node): the program runs on until it ends
or is stopped (`lp.attach(run_id).stop()`, or `scancel JOBID`). The run folder of the shared
filesystem, private to the user, is the run's record: its name is the run id, and it holds
the job id, the controller's address and token, and in the end the program's outcome.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pickle
import sys
import time
from typing import Any

import cloudpickle

from launchpad import address, telemetry
from launchpad.context import LaunchType
from launchpad.control import ControllerClient
from launchpad.courier import TLS
from launchpad.launch.runtime import (
    errors,
    private_files,
    run_records,
    run_states,
    terminals,
)
from launchpad.launch.runtime.controller import Controller
from launchpad.launch.runtime.controllers import RemoteController
from launchpad.launch.runtime.launcher import LaunchOptions
from launchpad.launch.runtime.terminals import NodeOutput
from launchpad.launch.slurm import job as slurm_job
from launchpad.launch.slurm import placement as slurm_placement
from launchpad.launch.slurm import submission as slurm
from launchpad.launch.slurm import time_limit
from launchpad.program import Program

_POLL_SECS = 0.2  # how often the run folder and the job's state are read (no event for them)


@dataclasses.dataclass
class _LaunchSpec:
    """What the batch step needs to launch the program where it runs."""

    program: bytes  # cloudpickle of the Program
    options: LaunchOptions
    placement: slurm_placement.Placement  # computed at launch, against the cluster then
    states: run_states.RunStates | None  # made at launch, in the run folder


def launch(program: Program, options: LaunchOptions) -> SlurmRemoteController:
    """Submits the job whose batch step is the program's controller."""
    settings = options.settings or slurm.SlurmSettings()
    placement = slurm.placement_of(program, options.resources, settings)
    run_dir = run_records.make(program.name, settings.run_dir)
    states = run_states.prepare(program, os.path.basename(run_dir),
                                 run_states.state_folder(run_dir), options.resume,
                                 options.resume_partial, settings.run_dir)
    try:
        pickled = cloudpickle.dumps(program)
    except Exception as e:
        raise ValueError(f"Program {program.name!r} cannot be serialized for its controller "
                         f"in the job ({type(e).__name__}: {e})") from e
    path = os.path.join(run_dir, "launch.spec")
    kept = dataclasses.replace(options, test_case=None)  # (no test runs in the job)
    private_files.write_private(path, pickle.dumps(_LaunchSpec(pickled, kept, placement,
                                                               states)))
    job = slurm_job.SlurmJob.submit(
        placement, slurm.sbatch_argv(placement, settings, run_dir, [
            sys.executable, "-m", "launchpad.launch", "--slurm-controller", path]),
        pending_timeout_secs=settings.pending_timeout_secs)
    private_files.write_private(os.path.join(run_dir, "job"), job.job_id.encode())
    return SlurmRemoteController(program.name, job, run_dir, options.tls)


def attach(folder: str) -> SlurmRemoteController:
    """The controller of the detached run whose record is `folder` (lp.attach finds it).

    Raises:
      LaunchError: the run is not a detached Slurm run.
    """
    try:
        job_id = private_files.read_private(os.path.join(folder, "job")).decode()
        launch_spec = pickle.loads(private_files.read_private(
            os.path.join(folder, "launch.spec")))
    except FileNotFoundError as e:
        raise errors.LaunchError(f"Run {os.path.basename(folder)!r} is not a detached run "
                                 f"({e})") from e
    return SlurmRemoteController(run_records.program_name_of(os.path.basename(folder)),
                                 slurm_job.SlurmJob(job_id, launch_spec.placement, running=True),
                                 folder, launch_spec.options.tls)


def records_run(folder: str) -> bool:
    """Whether `folder` is the record of a detached Slurm run."""
    return os.path.exists(os.path.join(folder, "job"))


def run_of(folder: str) -> run_records.Run | None:
    """The detached Slurm run recorded in `folder`, for `launchpad ls`; while its job waits
    to run, with what it waits for (`pending`, and no controller yet); None once it has
    ended."""
    if os.path.exists(os.path.join(folder, "outcome")):
        return None
    launch_spec = pickle.loads(private_files.read_private(os.path.join(folder, "launch.spec")))
    try:
        address, token = pickle.loads(private_files.read_private(
            os.path.join(folder, "controller.address")))
        pending = ""
    except FileNotFoundError:
        job_id = private_files.read_private(os.path.join(folder, "job")).decode()
        pending = slurm_job.SlurmJob(job_id, launch_spec.placement, running=True).waiting()
        if not pending:
            return None  # it ended before its controller started, or that is starting now
        address = token = ""
    run_id = os.path.basename(folder)
    return run_records.Run(run_id, run_records.program_name_of(run_id),
                           f"{LaunchType.SLURM.value} (detached)",
                           run_records.started_at_of(run_id), address, token,
                           launch_spec.options.tls, folder, log_dir=folder, pending=pending)


class DetachedSlurmRuns:
    """Detached Slurm runs, as `lp.launch(detach=True)`, `launchpad ls` and `lp.attach` use
    them (runtime/launcher.DetachedRuns)."""

    def launch(self, program: Program, options: LaunchOptions) -> SlurmRemoteController:
        return launch(program, options)

    def run_of(self, folder: str) -> run_records.Run | None:
        return run_of(folder) if records_run(folder) else None

    def attach(self, run_id: str, folder: str | None,
               namespace: str | None) -> SlurmRemoteController | None:
        return attach(folder) if folder is not None and records_run(folder) else None

    def runs_in(self, namespace: str) -> list[run_records.Run]:
        return []  # its runs are recorded in run folders, none kept by a namespace


def run_controller(path: str) -> int:
    """The batch step: launches the program from here and holds the job until it ends."""
    launch_spec = pickle.loads(private_files.read_private(path))
    program: Program = cloudpickle.loads(launch_spec.program)
    options = launch_spec.options
    run_dir = os.path.dirname(path)
    output = NodeOutput(run_dir, terminals.make(options.terminal, program.name, run_dir,
                                                keep_logs=True), run_dir)
    controller = Controller(
        program, launch_type=LaunchType.SLURM.value, run_id=os.path.basename(run_dir),
        output=output, states=launch_spec.states,
        host=address.routed_host(slurm.slurmctld_address()), tls=options.tls,
        **options.clocks.controller_arguments())
    # This job: it ends when this batch step does, so the program's end need not cancel it.
    job = slurm_job.SlurmJob(os.environ["SLURM_JOB_ID"], launch_spec.placement, running=True,
                             ends_with_this_process=True)
    slurm.start_nodes(program, controller, job, options, output)
    private_files.write_private(os.path.join(run_dir, "controller.address"),
                                pickle.dumps((controller.address, controller.token)))
    try:
        controller.wait()
        failure = None
    except errors.NodeFailedError as e:
        failure = e
    settings = options.settings or slurm.SlurmSettings()
    if (failure is None and settings.requeue
            and controller.stop_reason.startswith(time_limit.END_WARNING)):
        _requeue(run_dir, job.job_id)
        return 0
    private_files.write_private(os.path.join(run_dir, "outcome"), pickle.dumps((
        failure, controller.stop_reason, controller.exit_codes(), controller.restarts())))
    return 0


def _requeue(run_dir: str, job_id: str) -> None:
    """Puts this job back in the queue: its controller's address goes (a requeued run says
    where its new one is), the count of requeues grows, and Slurm ends this batch step."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(run_dir, "controller.address"))
    count = requeues_of(run_dir) + 1
    private_files.write_private(os.path.join(run_dir, "requeues"), str(count).encode())
    terminals.say(f"Slurm job {job_id} was warned of its end: its program has saved and "
                  f"stopped, and the job is requeued (requeue {count})")
    slurm_job.run(["scontrol", "requeue", job_id])


def requeues_of(run_dir: str) -> int:
    """How many times the job of the run in `run_dir` has requeued itself."""
    try:
        return int(private_files.read_private(os.path.join(run_dir, "requeues")))
    except FileNotFoundError:
        return 0


class SlurmRemoteController(RemoteController):
    """The controller of a detached program, whose controller runs inside its Slurm job: the
    same `wait()`, `stop()`, `kill()`, `stop_and_wait()`, `exit_codes()`, `restarts()` and
    `with` as `lp.Controller`; `run_id` names the run for `lp.attach`."""

    def __init__(self, program_name: str, job: slurm_job.SlurmJob, run_dir: str,
                 tls: TLS | None):
        self.program_name = program_name
        self.job_id = job.job_id
        self.run_dir = run_dir
        self.run_id = os.path.basename(run_dir)
        self._job = job
        self._tls = tls
        self.failure: errors.NodeFailedError | None = None
        self.stop_reason = ""
        self._killed = False

    def _read(self, name: str) -> Any:
        try:
            return pickle.loads(private_files.read_private(os.path.join(self.run_dir, name)))
        except FileNotFoundError:
            return None

    def _controller_at(self) -> tuple[str, str, TLS | None] | None:
        """Where the batch step's controller listens, once it has said."""
        where = self._read("controller.address")
        return None if where is None else (*where, self._tls)

    def stop(self, reason: str = "") -> None:
        """Asks the program to stop (the job is cancelled if it has not started yet)."""
        if self._read("outcome") is not None:
            return  # it has ended
        if self._read("controller.address") is None:
            self.kill()  # its controller has not started: nothing runs yet
            return
        self._ask(lambda controller: controller.request_stop(reason))

    def exit_codes(self) -> dict[str, int | None]:
        """'label/index' -> how each node's run ended (None: running); {} before it runs."""
        outcome = self._read("outcome")
        if outcome is not None:
            return outcome[2]
        return self._ask(ControllerClient.exit_codes) or {}

    def restarts(self) -> dict[str, int]:
        """'label/index' -> how many times the node was restarted by its group's policy."""
        outcome = self._read("outcome")
        if outcome is not None:
            return outcome[3]
        return self._ask(ControllerClient.restarts) or {}

    def status(self) -> telemetry.ProgramStatus | None:
        """The program's status from its controller; while its job waits to run, 'pending'
        with Slurm's reason; None once it has ended."""
        if self._read("outcome") is not None:
            return None  # it has ended
        if self._read("controller.address") is None:  # pending, or its controller starting
            run = run_of(self.run_dir)
            return run.pending_status() if run is not None and run.pending else None
        return self._ask(ControllerClient.status)

    def kill(self) -> None:
        """Ends the job at once (`wait()` then returns True, here and in every process
        attached to the run: the outcome says it was killed, unless its controller said how
        the program ended first)."""
        self._killed = True
        self.stop_reason = f"killed: Slurm job {self.job_id} was cancelled"
        self._job.cancel()
        if self._read("outcome") is None:  # the job has ended: nothing else writes it now
            partial = os.path.join(self.run_dir, ".outcome")
            private_files.write_private(partial, pickle.dumps(
                (None, self.stop_reason, {}, {})))
            os.replace(partial, os.path.join(self.run_dir, "outcome"))  # whole, or not there

    def _wait(self, timeout: float | None) -> bool:
        """Blocks until the program has ended, and its job with it (the batch step ends
        right after it writes the outcome); False if `timeout` seconds passed first.

        Raises:
          NodeFailedError: a node failed (the first one), with its traceback.
          LaunchError: the job ended without its controller saying how (see its output).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        requeues = requeues_of(self.run_dir)
        while True:
            outcome = self._read("outcome")
            alive = self._job.alive()
            if outcome is not None and not alive:
                self.failure, self.stop_reason = outcome[:2]
                if self.failure is not None:
                    raise self.failure
                return True
            if not alive and outcome is None:
                if self._killed:
                    return True
                if requeues_of(self.run_dir) != requeues:  # between its runs
                    requeues = requeues_of(self.run_dir)
                    continue
                if self._read("outcome") is None:
                    raise errors.LaunchError(
                        f"Slurm job {self.job_id} of program {self.program_name!r} ended "
                        "before its controller said how the program did; see "
                        f"{os.path.join(self.run_dir, f'slurm-{self.job_id}.out')}")
                continue
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_SECS)  # the run folder and the job's state: no event for them
