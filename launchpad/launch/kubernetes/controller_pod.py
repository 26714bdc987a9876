"""The controller's pod of a Kubernetes program: `python -m launchpad.launch
--kubernetes-controller PATH`.

It runs the program's `Controller` (listening on 0.0.0.0:<port>, advertising its Service's DNS
name, with the token of the launch's Secret) but starts none of the launch's nodes: Kubernetes
runs each node's pod, and re-runs a failed one as its Job's backoffLimit (the group's
max_restarts) allows. Each node's worker is a `PodWorker` (pod_worker.py), which knows its pod
only through the node's own reports. With KubernetesSettings(allow_changes=True) the pod's
ServiceAccount lets it change the program while it runs: it makes and deletes the objects of
the nodes a scale or an apply starts or removes, and of a node whose run was lost (its host,
or its pod frozen) and that its group's policy restarts (running_nodes.py); and it answers
the questions asked of it through the API (relay.py).

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
from typing import Any

import cloudpickle

from launchpad.context import LaunchType
from launchpad.launch.kubernetes import pod as kubernetes_pod
from launchpad.launch.kubernetes import states as kubernetes_states
from launchpad.launch.kubernetes.api import Api
from launchpad.launch.kubernetes.manifests import LaunchSpec
from launchpad.launch.kubernetes.pod_worker import PodWorker
from launchpad.launch.kubernetes.relay import Answering
from launchpad.launch.kubernetes.running_nodes import RunningNodes
from launchpad.launch.runtime import errors
from launchpad.launch.runtime.controller import Controller
from launchpad.program import Program

OUTCOME_PREFIX = "launchpad-outcome: "


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
        states = kubernetes_states.prepare(program, launch_spec.launch_id, launch_spec.resume,
                                           launch_spec.resume_partial)
    except errors.StateError as e:
        print(OUTCOME_PREFIX + json.dumps(refused(program.name, e)), flush=True)
        return 1
    controller = Controller(
        program, termination_notice_secs=launch_spec.termination_notice_secs,
        liveness_timeout_secs=launch_spec.liveness_timeout_secs, host="0.0.0.0",
        port=launch_spec.port, token=token, advertised_host=launch_spec.service_host,
        tls=tls, launch_type=LaunchType.KUBERNETES.value, run_id=launch_spec.launch_id,
        states=states)

    def on_sigterm(*_: Any) -> None:
        threading.Thread(target=controller.stop, daemon=True, args=(
            "Kubernetes is deleting the controller's pod (the launch was stopped)",)).start()

    changes = launch_spec.settings.allow_changes
    api = Api.connect() if changes else None  # as its ServiceAccount

    def follow(nodes: list) -> None:
        for node in nodes:
            worker = PodWorker(node.name, launch_spec.startup_timeout_secs,
                               controller.worker_ended,
                               rerun=running_nodes.rerun if running_nodes else None)
            controller.add_worker(worker)
            worker.start()

    running_nodes = RunningNodes(api, launch_spec, program, token, follow) if api else None
    signal.signal(signal.SIGTERM, on_sigterm)
    follow(program.get_all_nodes())
    answering = None
    if api is not None and running_nodes is not None:
        controller.scaling.start_nodes = running_nodes.start
        controller.scaling.nodes_removed = running_nodes.removed
        answering = Answering(api, launch_spec.settings.namespace, launch_spec.launch_id,
                              token, controller.protocol)
        answering.start()
    try:
        controller.wait()
        failure = None
    except errors.NodeFailedError as e:
        failure = e
    finally:
        if answering is not None:
            answering.stop()
    print(OUTCOME_PREFIX + json.dumps(outcome(controller, failure)), flush=True)
    return 1 if failure else 0
