"""The controller's pod of a Kubernetes program: `python -m launchpad.launch
--kubernetes-controller PATH`.

It runs the program's `Controller` (listening on 0.0.0.0:<port>, advertising its Service's DNS
name, with the token of the launch's Secret) but starts nothing: Kubernetes runs each node's
pod, and re-runs a failed one as its Job's backoffLimit (the group's max_restarts) allows. Each
node's worker is a `PodWorker`, a proxy that knows its pod only through the node's own reports
(the supervisor tells it, see supervisor.py), because nothing here may watch pods::

    node_started(instance)            -> the run is on (heartbeats from now on)
    node_finished / node_failed       -> the run has ended: 0 / 1, the supervisor decides
    no heartbeat for the liveness timeout  -> lost (the supervisor's own doing)
    not started within startup_timeout_secs -> failed: its pod is pending or cannot start
    restart()                         -> waits for the pod Kubernetes starts again

A failure with restarts left waits for the new pod; with none left it stops the program (the
nodes see it and exit). SIGTERM (Kubernetes deleting this pod, when the launch is stopped)
stops the program gracefully. At the end it prints the outcome as one line,
`launchpad-outcome: {json}` (the launching process reads it from this pod's log), and exits 0
(the program finished or was stopped) or 1 (a node failed). Before it serves, it prepares the
launch's states (kubernetes/states.py); a resume it refuses is its outcome
(`{"refused": why}`, exit 1), and no node starts.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import threading
from collections.abc import Callable
from typing import Any

import cloudpickle

from launchpad.context import LaunchType
from launchpad.launch.kubernetes import pod as kubernetes_pod
from launchpad.launch.kubernetes import states as kubernetes_states
from launchpad.launch.kubernetes.manifests import LaunchSpec
from launchpad.launch.runtime import errors
from launchpad.launch.runtime.controller import Controller
from launchpad.launch.runtime.ending import NodeWorker
from launchpad.program import Program

OUTCOME_PREFIX = "launchpad-outcome: "
_FAILED = 1  # the exit code a node's runner gives when its node raised


class PodWorker(NodeWorker):
    """A node's pod, as its controller sees it (see the module doc; a NodeWorker).

    Args:
      name: the node, 'label/index'.
      startup_timeout_secs: how long its pod may take to start, each run.
      on_end: called with this worker once a run has ended (Controller.worker_ended).
    """

    ended_by_launcher = False
    spawned_at = None  # the pod's start is timed here (startup_timeout_secs), not there

    def __init__(self, name: str, startup_timeout_secs: float,
                 on_end: Callable[[PodWorker], None]):
        self.name = name
        self.attempt = 0
        self.returncode: int | None = None
        self._startup_timeout = startup_timeout_secs
        self._on_end = on_end
        self._lock = threading.Lock()
        self._ended = threading.Event()
        self._how = ""
        self._instance: str | None = None  # the current run, once its pod has started
        # A run of the next attempt that started (and maybe ended) before restart() was
        # called: Kubernetes re-runs a pod on its own clock, not the supervisor's.
        self._early: str | None = None
        self._early_end: bool | None = None
        self._timer: threading.Timer | None = None

    def start(self) -> None:
        """Starts waiting for the first run's pod."""
        self._arm()

    def _arm(self) -> None:
        self._timer = threading.Timer(self._startup_timeout, self._not_started,
                                      (self.attempt,))
        self._timer.daemon = True
        self._timer.start()

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _not_started(self, attempt: int) -> None:
        with self._lock:
            if self._instance is not None or self.attempt != attempt or self._ended.is_set():
                return
        self._end(_FAILED, f"its pod did not start within {self._startup_timeout:g}s (it "
                           "may be pending: no Kubernetes node has the resources it asks "
                           "for, or its image cannot be pulled)")

    def run_started(self, instance: str) -> None:
        """The node's runner reported it started (supervisor.py)."""
        with self._lock:
            if self._ended.is_set():
                self._early, self._early_end = instance, None
                return
            self._instance = instance
            self._disarm()

    def run_reported(self, instance: str, finished: bool) -> None:
        """The node's run `instance` reported how it ended (supervisor.py)."""
        with self._lock:
            if instance == self._early:
                self._early_end = finished
                return
            if instance != self._instance or self._ended.is_set():
                return
        self._end(0 if finished else _FAILED,
                  "its node finished" if finished else "its node raised")

    def _end(self, returncode: int, how: str) -> None:
        with self._lock:
            if self._ended.is_set():
                return
            self.returncode, self._how = returncode, how
            self._ended.set()
            self._disarm()
        self._on_end(self)

    def describe_end(self) -> str:
        return f"pod of attempt {self.attempt + 1}: {self._how}"

    def join(self, timeout: float) -> bool:
        return self._ended.wait(timeout)

    def terminate(self) -> bool:
        return False  # a pod is ended by Kubernetes (deleting it), not by its controller

    def kill(self) -> None:
        """The run is given up (lost, or the program killed): it counts as ended here; its
        pod, if it still runs, ends by itself once it finds its run given up."""
        with self._lock:
            if self._ended.is_set():
                return
            self.returncode, self._how = None, "given up by its controller"
            self._ended.set()
            self._disarm()

    def restart(self) -> None:
        """Waits for the pod Kubernetes runs again (its Job's backoffLimit allows it)."""
        with self._lock:
            self.attempt += 1
            self.returncode, self._how = None, ""
            self._instance, self._early = self._early, None
            early_end, self._early_end = self._early_end, None
            self._ended.clear()
        if self._instance is None:
            self._arm()
        elif early_end is not None:
            self._end(0 if early_end else _FAILED,
                      "its node finished" if early_end else "its node raised")


def outcome(controller: Controller, failure: errors.NodeFailedError | None) -> dict[str, Any]:
    """How the program ended, as the one-line JSON the controller's pod prints."""
    return {"program": controller.program_name,
            "failed_node": failure.node if failure else None,
            "reason": failure.reason if failure else "",
            "traceback": failure.node_traceback if failure else "",
            "stop_reason": controller.stop_reason,
            "exit_codes": controller.exit_codes(), "restarts": controller.restarts()}


def refused(program_name: str, error: errors.StateError) -> dict[str, Any]:
    """The outcome of a launch whose controller refused to start it: no node ran."""
    return {"program": program_name, "failed_node": None, "reason": "", "traceback": "",
            "stop_reason": f"refused: {error}", "exit_codes": {}, "restarts": {},
            "refused": str(error)}


def run(path: str) -> int:
    """Controls the program of the launch spec at `path` (mounted, sealed); its exit status."""
    token, tls = kubernetes_pod.read_secret(os.environ[kubernetes_pod.SECRET_DIR_ENV])
    launch_spec = pickle.loads(kubernetes_pod.read_sealed(path, token))
    if not isinstance(launch_spec, LaunchSpec):
        raise TypeError(f"{path} holds a {type(launch_spec).__name__}, not a launch spec")
    program: Program = cloudpickle.loads(launch_spec.program)
    try:  # before anything serves: a resume refused starts no node
        kubernetes_states.prepare(program, launch_spec.launch_id, launch_spec.resume,
                                  launch_spec.resume_partial)
    except errors.StateError as e:
        print(OUTCOME_PREFIX + json.dumps(refused(program.name, e)), flush=True)
        return 1
    controller = Controller(
        program, termination_notice_secs=launch_spec.termination_notice_secs,
        liveness_timeout_secs=launch_spec.liveness_timeout_secs, host="0.0.0.0",
        port=launch_spec.port, token=token, advertised_host=launch_spec.service_host,
        tls=tls, launch_type=LaunchType.KUBERNETES.value)

    def on_sigterm(*_: Any) -> None:
        threading.Thread(target=controller.stop, daemon=True, args=(
            "Kubernetes is deleting the controller's pod (the launch was stopped)",)).start()

    signal.signal(signal.SIGTERM, on_sigterm)
    for node in program.get_all_nodes():
        worker = PodWorker(node.name, launch_spec.startup_timeout_secs,
                           controller.worker_ended)
        controller.add_worker(worker)
        worker.start()
    try:
        controller.wait()
        failure = None
    except errors.NodeFailedError as e:
        failure = e
    print(OUTCOME_PREFIX + json.dumps(outcome(controller, failure)), flush=True)
    return 1 if failure else 0
