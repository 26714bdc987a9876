"""slurm with the controller inside the job: a program that lives in the cluster.

    lp.launch(program, launch_type="slurm", slurm=lp.SlurmSettings(controller="job"))

    the launching process                  the job's batch step, on a node of the job
      the launch's spec (a private file) -> python -m launchpad.launch --control PATH:
      sbatch                                a Controller listening where the cluster's hosts
                                            reach it, starting a step per node (slurm.py)
      RemoteController: stop() asks it   <- controller.address (a private file)
        wait() reads how it ended        <- outcome (a private file): failure, stop reason
                                            then the batch step ends, and with it the job

The launching process may go (log out of the login node): the program runs on until it ends
or is stopped (`scancel JOBID`, or `stop()` from a process that holds its RemoteController).
Files travel through the run folder of the shared filesystem, private to the user.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import sys
import time
from typing import Any

import cloudpickle

from launchpad import address, control
from launchpad.courier.tls import TLS
from launchpad.launch import errors, private_files, slurm
from launchpad.launch import resources as resources_lib
from launchpad.launch.controller import Controller
from launchpad.program import Program

_POLL_SECS = 0.2  # how often the run folder and the job's state are read (no event for them)


@dataclasses.dataclass
class _LaunchSpec:
    """What the batch step needs to launch the program where it runs."""

    program: bytes  # cloudpickle of the Program
    options: dict[str, Any]
    termination_notice_secs: float
    liveness_timeout_secs: float
    tls: TLS | None


def launch(program: Program, options: dict[str, Any], *, termination_notice_secs: float,
           liveness_timeout_secs: float, tls: TLS | None) -> RemoteController:
    """Submits the job whose batch step is the program's controller."""
    settings = options["slurm"]
    needs = resources_lib.per_group(list(program.groups), program.name, options["resources"])
    run_dir = slurm.make_run_dir(program.name, settings)
    try:
        pickled = cloudpickle.dumps(program)
    except Exception as e:
        raise ValueError(f"Program {program.name!r} cannot be serialized for its controller "
                         f"in the job ({type(e).__name__}: {e})") from e
    path = os.path.join(run_dir, "launch.spec")
    kept = {k: options[k] for k in ("resources", "slurm", "local_resources", "terminal",
                                    "bind_address")}
    private_files.write_private(path, pickle.dumps(_LaunchSpec(
        pickled, kept, termination_notice_secs, liveness_timeout_secs, tls)))
    job = slurm.SlurmJob.submit(program.name, slurm.components_of(program, needs), settings,
                                run_dir, [sys.executable, "-m", "launchpad.launch",
                                          "--control", path])
    return RemoteController(program.name, job, run_dir, tls)


def run_controller(path: str) -> int:
    """The batch step: launches the program from here and holds the job until it ends."""
    launch_spec = pickle.loads(private_files.read_private(path))
    program: Program = cloudpickle.loads(launch_spec.program)
    options = launch_spec.options
    settings = options["slurm"]
    needs = resources_lib.per_group(list(program.groups), program.name, options["resources"])
    controller = Controller(
        program, termination_notice_secs=launch_spec.termination_notice_secs,
        liveness_timeout_secs=launch_spec.liveness_timeout_secs,
        host=address.routed_host(slurm.slurmctld_address()), tls=launch_spec.tls)
    run_dir = os.path.dirname(path)
    # This job: it ends when this batch step does, so the program's end need not cancel it.
    job = slurm.SlurmJob(os.environ["SLURM_JOB_ID"], slurm.components_of(program, needs),
                         running=True, ends_with_this_process=True)
    slurm.start_nodes(program, controller, job, needs, settings, run_dir,
                      terminal=options["terminal"], local_resources=options["local_resources"],
                      bind_address=options["bind_address"])
    private_files.write_private(os.path.join(run_dir, "controller.address"),
                                pickle.dumps((controller.address, controller.token)))
    try:
        controller.wait()
        failure = None
    except errors.NodeFailedError as e:
        failure = e
    private_files.write_private(os.path.join(run_dir, "outcome"),
                                pickle.dumps((failure, controller.stop_reason)))
    return 0


class RemoteController:
    """The controller of a program whose controller runs inside its Slurm job; the same
    `wait()`, `stop()`, `kill()`, `stop_and_wait()` and `with` as `lp.Controller`."""

    def __init__(self, program_name: str, job: slurm.SlurmJob, run_dir: str,
                 tls: TLS | None):
        self.program_name = program_name
        self.job_id = job.job_id
        self.run_dir = run_dir
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

    def stop(self, reason: str = "") -> None:
        """Asks the program to stop (the job is cancelled if it has not started yet)."""
        where = self._read("controller.address")
        if where is None:
            self.kill()
            return
        client = control.ControllerClient(*where, self._tls)
        try:
            client.request_stop(reason)
        finally:
            client.close()

    def kill(self) -> None:
        """Ends the job at once (`wait()` then returns True)."""
        self._killed = True
        self.stop_reason = f"killed: Slurm job {self.job_id} was cancelled"
        self._job.cancel()

    def wait(self, timeout: float | None = None) -> bool:
        """Blocks until the program has ended; False if `timeout` seconds passed first.

        Raises:
          NodeFailedError: a node failed (the first one), with its traceback.
          LaunchError: the job ended without its controller saying how (see its output).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            outcome = self._read("outcome")
            if outcome is not None:
                self.failure, self.stop_reason = outcome
                if self.failure is not None:
                    raise self.failure
                return True
            if not self._job.alive():
                if self._killed:
                    return True
                if self._read("outcome") is None:
                    raise errors.LaunchError(
                        f"Slurm job {self.job_id} of program {self.program_name!r} ended "
                        "before its controller said how the program did; see "
                        f"{os.path.join(self.run_dir, f'slurm-{self.job_id}.out')}")
                continue
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_SECS)  # the run folder and the job's state: no event for them

    def stop_and_wait(self) -> bool:
        self.stop()
        return self.wait()

    def __enter__(self) -> RemoteController:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.stop()
        if exc_type is None:
            self.wait()
