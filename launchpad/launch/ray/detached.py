"""Detached Ray programs: the controller in a detached actor, so the program lives in the
cluster.

    controller = lp.launch(program, launch_type="ray", detach=True)   # returns at once
    run_id = controller.run_id
    ...                                      # the launching process may go
    lp.attach(run_id).stop()                 # later, from any process of the same user

    the launching process                  the Ray cluster
      ControllerActor (detached, named    -> start(): a Controller listening where the Ray
      launchpad-RUNID, namespace             nodes reach it, starting an actor per node
      "launchpad", no CPU reserved)          (ray/actors.py; the node actors are owned by
                                             this actor, so they end with it)
      the run's record (a private file)  <- the controller's address and token
      RayRemoteController: stop(),       -> the controller protocol (request_stop, exit_codes,
        exit_codes(), restarts()            restarts)
        wait(): the outcome              <- outcome(): failure, stop reason, exit codes,
                                             restarts; then release() ends the actor

The record is `~/.launchpad/launchpad-runs-<uid>/<run_id>/ray.run` (run_records.py): it names
the cluster, the actor and the controller's address and token, readable by its owner only.
The actor keeps the outcome until a `wait()` has read it, or for a day after the program's
end, then exits by itself: nothing of the run is left in the cluster.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import shutil
import threading
from typing import Any

import cloudpickle

from launchpad import address, telemetry
from launchpad.context import LaunchType
from launchpad.control import ControllerClient
from launchpad.courier import TLS
from launchpad.launch.ray import actors as ray_actors
from launchpad.launch.ray import connection as ray_connection
from launchpad.launch.ray.settings import RaySettings
from launchpad.launch.runtime import errors, private_files, run_records, run_states
from launchpad.launch.runtime.controller import Controller
from launchpad.launch.runtime.controllers import RemoteController
from launchpad.launch.runtime.launcher import LaunchOptions
from launchpad.program import Program

RECORD = "ray.run"
NAMESPACE = "launchpad"
_KEEP_OUTCOME_SECS = 24 * 3600.0
_START_TIMEOUT_SECS = 300.0  # room for the cluster to place every node's actor


@dataclasses.dataclass
class _Record:
    """What attaching to the run needs."""

    program_name: str
    gcs_address: str
    actor_name: str
    controller_address: str
    token: str
    tls: TLS | None


class ControllerActor:
    """The program's controller, as a detached actor (see the module doc)."""

    def __init__(self, program: bytes, options: LaunchOptions,
                 states: run_states.RunStates | None):
        self._program: Program = cloudpickle.loads(program)
        self._options = options
        self._states = states
        self._outcome: tuple | None = None
        self._ended = threading.Event()
        self._released = threading.Event()

    def start(self, run_id: str) -> tuple[str, str]:
        """Launches the program from here as run `run_id`; returns the controller's (address,
        token)."""
        import ray
        gcs_host = ray.get_runtime_context().gcs_address.rsplit(":", 1)[0]
        controller = Controller(self._program, launch_type=LaunchType.RAY.value, run_id=run_id,
                                states=self._states, host=address.routed_host(gcs_host),
                                tls=self._options.tls,
                                **self._options.clocks.controller_arguments())
        ray_actors.start_actors(self._program, controller, self._options)
        threading.Thread(target=self._follow, args=(controller,), daemon=True,
                         name="lp-detached-controller").start()
        return controller.address, controller.token

    def _follow(self, controller: Controller) -> None:
        try:
            controller.wait()
            failure = None
        except errors.NodeFailedError as e:
            failure = e
        self._outcome = (failure, controller.stop_reason, controller.exit_codes(),
                         controller.restarts())
        self._ended.set()
        self._released.wait(_KEEP_OUTCOME_SECS)
        os._exit(0)  # the run is over and its outcome read (or kept long enough)

    def outcome(self, timeout: float | None) -> tuple | None:
        """(failure, stop reason, exit codes, restarts) once the program has ended; None if
        it has not within `timeout` seconds."""
        self._ended.wait(timeout)
        return self._outcome

    def release(self) -> None:
        """The outcome has been read: the actor may go."""
        self._released.set()


def launch(program: Program, options: LaunchOptions) -> RayRemoteController:
    """Starts the program's controller as a detached actor, which launches the program."""
    settings: RaySettings = options.settings or RaySettings()
    try:
        pickled = cloudpickle.dumps(program)
    except Exception as e:
        raise ValueError(f"Program {program.name!r} cannot be serialized for its controller "
                         f"in the Ray cluster ({type(e).__name__}: {e})") from e
    folder = run_records.make(program.name)
    run_id = os.path.basename(folder)
    kept = dataclasses.replace(options, test_case=None)  # (no test runs in the cluster)
    try:
        states = run_states.prepare(program, run_id, run_states.state_folder(folder),
                                     options.resume, options.resume_partial)
        record = _start_controller(program.name, run_id, settings, pickled, kept, states)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)  # no run: no record of one
        raise
    private_files.write_private(os.path.join(folder, RECORD), pickle.dumps(record))
    return RayRemoteController(run_id, record)


def _start_controller(program_name: str, run_id: str, settings: RaySettings, pickled: bytes,
                      options: LaunchOptions, states: run_states.RunStates | None) -> _Record:
    """Starts the controller's actor and, through it, the program; the run's record."""
    import ray
    gcs = ray_connection.connect(settings)
    ray_connection.hold()
    try:
        actor = ray.remote(ControllerActor).options(
            name=f"launchpad-{run_id}", namespace=NAMESPACE, lifetime="detached",
            num_cpus=0, max_concurrency=4, max_restarts=0,
            **({"runtime_env": dict(settings.runtime_env)} if settings.runtime_env else {})
        ).remote(pickled, options, states)
        try:
            controller_address, token = ray.get(actor.start.remote(run_id),
                                                timeout=_START_TIMEOUT_SECS)
        except BaseException:
            ray.kill(actor)
            raise
    finally:
        ray_connection.release()
    return _Record(program_name, gcs, f"launchpad-{run_id}", controller_address, token,
                   options.tls)


def records_run(folder: str) -> bool:
    """Whether `folder` is the record of a detached Ray run."""
    return os.path.exists(os.path.join(folder, RECORD))


def run_of(folder: str) -> run_records.Run:
    """The detached Ray run recorded in `folder`, for `launchpad ls`."""
    record = pickle.loads(private_files.read_private(os.path.join(folder, RECORD)))
    run_id = os.path.basename(folder)
    return run_records.Run(run_id, record.program_name, f"{LaunchType.RAY.value} (detached)",
                           run_records.started_at_of(run_id), record.controller_address,
                           record.token, record.tls, folder)


class DetachedRayRuns:
    """Detached Ray runs, as `lp.launch(detach=True)`, `launchpad ls` and `lp.attach` use
    them (runtime/launcher.DetachedRuns)."""

    def launch(self, program: Program, options: LaunchOptions) -> RayRemoteController:
        return launch(program, options)

    def run_of(self, folder: str) -> run_records.Run | None:
        return run_of(folder) if records_run(folder) else None

    def attach(self, run_id: str, folder: str | None,
               namespace: str | None) -> RayRemoteController | None:
        return attach(folder) if folder is not None and records_run(folder) else None

    def runs_in(self, namespace: str) -> list[run_records.Run]:
        return []  # its runs are recorded in run folders, none kept by a namespace


def attach(folder: str) -> RayRemoteController:
    """The controller of the detached Ray run whose record is `folder` (lp.attach finds it)."""
    record = pickle.loads(private_files.read_private(os.path.join(folder, RECORD)))
    return RayRemoteController(os.path.basename(folder), record)


class RayRemoteController(RemoteController):
    """The controller of a detached Ray program: the same `wait()`, `stop()`, `kill()`,
    `stop_and_wait()`, `exit_codes()`, `restarts()` and `with` as `lp.Controller`; `run_id`
    names the run for `lp.attach`."""

    def __init__(self, run_id: str, record: _Record):
        self.run_id = run_id
        self.program_name = record.program_name
        self._record = record
        self._outcome: tuple | None = None
        self.failure: errors.NodeFailedError | None = None
        self.stop_reason = ""

    def _controller_at(self) -> tuple[str, str, TLS | None]:
        """Where the controller's actor serves the protocol (as its record says)."""
        return self._record.controller_address, self._record.token, self._record.tls

    def stop(self, reason: str = "") -> None:
        """Asks the program to stop (returns at once)."""
        if self._outcome is None:
            self._ask(lambda controller: controller.request_stop(reason))

    def exit_codes(self) -> dict[str, int | None]:
        """'label/index' -> how each node's run ended (None: running)."""
        if self._outcome is not None:
            return self._outcome[2]
        return self._ask(ControllerClient.exit_codes) or self._read_outcome(0)[2]

    def restarts(self) -> dict[str, int]:
        """'label/index' -> how many times the node was restarted by its group's policy."""
        if self._outcome is not None:
            return self._outcome[3]
        return self._ask(ControllerClient.restarts) or self._read_outcome(0)[3]

    def status(self) -> telemetry.ProgramStatus | None:
        return None if self._outcome is not None else self._ask(ControllerClient.status)

    def _on_cluster(self, call: Any) -> Any:
        """`call(ray, actor)` connected to the run's cluster (the connection made for it)."""
        import ray
        settings = RaySettings(address=self._record.gcs_address)
        ray_connection.connect(settings)
        ray_connection.hold()
        try:
            actor = ray.get_actor(self._record.actor_name, namespace=NAMESPACE)
            return call(ray, actor)
        finally:
            ray_connection.release()

    def _read_outcome(self, timeout: float | None) -> tuple:
        """The outcome (None, ..., {}, {}) while the program runs; raises LaunchError if the
        controller's actor is gone without one."""
        def read(ray: Any, actor: Any) -> tuple | None:
            try:
                outcome = ray.get(actor.outcome.remote(timeout))
            except ray.exceptions.RayActorError as e:
                raise ValueError(f"its actor died: {str(e).strip().splitlines()[0]}") from e
            if outcome is not None:
                actor.release.remote()
            return outcome
        try:
            outcome = self._on_cluster(read)
        except ValueError as e:  # no such actor (ray.get_actor), or it died
            raise errors.LaunchError(
                f"The controller of run {self.run_id!r} (program {self.program_name!r}) is "
                f"gone from the Ray cluster without saying how the program did ({e})") from e
        if outcome is None:
            return (None, "", {}, {})
        self._outcome = outcome
        self.failure, self.stop_reason = outcome[:2]
        return outcome

    def kill(self) -> None:
        """Ends the program at once: its controller's actor, and with it every node's."""
        self.stop_reason = f"killed: the controller of run {self.run_id} was killed"
        self._outcome = (None, self.stop_reason, {}, {})
        try:
            self._on_cluster(lambda ray, actor: ray.kill(actor, no_restart=True))
        except ValueError:
            pass  # gone already

    def _wait(self, timeout: float | None) -> bool:
        """Blocks until the program has ended; False if `timeout` seconds passed first.

        Raises:
          NodeFailedError: a node failed (the first one), with its traceback.
          LaunchError: the controller's actor is gone without saying how the program did.
        """
        if self._outcome is None:
            self._read_outcome(timeout)
            if self._outcome is None:
                return False
        if self.failure is not None:
            raise self.failure
        return True
