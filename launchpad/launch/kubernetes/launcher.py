"""kubernetes: a program as Jobs, Services, a ConfigMap and a Secret of one namespace.

    controller = lp.launch(program, launch_type="kubernetes",
                           resources={"learner": lp.Resources(cpus=8, gpus=1)},
                           kubernetes=lp.KubernetesSettings(image="registry/app:1"))
    controller.wait()        # follows the controller's Job; raises NodeFailedError
    controller.stop()        # deletes every object of the launch, by its label

The objects are kubernetes_manifests.build's, the same `lp.kubernetes_manifests` returns,
created in order through the official `kubernetes` client (the kubeconfig's current context,
else the in-cluster configuration; imported only here, when a launch needs it). The pods
cannot reach the launching process, so the controller runs in the cluster, as its own Job
(kubernetes/controller_pod.py): a Kubernetes launch is always detached. `wait()` watches that Job
until it completes or fails and reads the program's outcome from its pod's log; `stop()`
deletes everything labelled with the launch (Foreground: each pod gets SIGTERM, which stops
the program gracefully, within its grace period); `kill()` deletes the pods at once.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from launchpad import telemetry
from launchpad.launch.kubernetes import manifests as kubernetes_manifests
from launchpad.launch.kubernetes import names
from launchpad.launch.kubernetes import pod as kubernetes_pod
from launchpad.launch.kubernetes.api import Api, check_client, message_of
from launchpad.launch.kubernetes.controller_pod import OUTCOME_PREFIX
from launchpad.launch.kubernetes.errors import KubernetesError
from launchpad.launch.kubernetes.launches import controller_jobs, job_ended, runs_in
from launchpad.launch.kubernetes.names import (
    CHANGES_ANNOTATION,
    LAUNCH_LABEL,
    NAME_ANNOTATION,
    ROLE_LABEL,
)
from launchpad.launch.kubernetes.relay import RelayedClient
from launchpad.launch.runtime import errors
from launchpad.launch.runtime.controllers import RemoteController
from launchpad.launch.runtime.launcher import (
    Detach,
    DetachedRuns,
    Launcher,
    LaunchOptions,
    Plan,
)
from launchpad.launch.runtime.run_records import Run
from launchpad.program import Program

_WATCH_SECS = 60  # a watch is renewed this often (the server ends each one)
_ACCESS_KINDS = ("ServiceAccount", "Role", "RoleBinding")


class KubernetesLauncher(Launcher):
    """kubernetes: a program as objects of one namespace, always detached (see the module
    doc); its pods' start is timed by lp.KubernetesSettings(startup_timeout_secs=...)."""

    name = "kubernetes"
    where_nodes_run = "a pod"
    detach = Detach.ALWAYS
    startup_timed_by = "a pod's start is timed by lp.KubernetesSettings(startup_timeout_secs=...)"

    def prepare(self, program: Program, options: LaunchOptions) -> Plan:
        """Refuses a launch that could not start: no client, no settings or no image."""
        check_client()
        kubernetes_manifests.check_settings(options.settings)
        return Plan(program, options, self.describe(program))

    def detached_runs(self) -> DetachedRuns:
        return KubernetesRuns()


class KubernetesRuns:
    """Kubernetes launches, found in their cluster (runtime/launcher.DetachedRuns)."""

    def launch(self, program: Program, options: LaunchOptions) -> RemoteController:
        return launch(program, options)

    def run_of(self, folder: str) -> None:
        """None: a Kubernetes launch keeps no record here (its cluster has it)."""
        return None

    def attach(self, run_id: str, folder: str | None,
               namespace: str | None) -> RemoteController | None:
        """A launch is found in its cluster, by its label, in the namespace given."""
        return None if namespace is None else attach(run_id, namespace)

    def runs_in(self, namespace: str) -> list[Run]:
        """The launches running in `namespace` (launches.py)."""
        return runs_in(namespace)


def launch(program: Program, options: LaunchOptions) -> KubernetesController:
    """Creates the program's objects (see the module doc); returns its controller.

    Raises:
      KubernetesError: the API refused an object (what was created is deleted again).
    """
    manifests = kubernetes_manifests.build(
        program, options.resources, options.settings, tls=options.tls,
        termination_notice_secs=options.clocks.termination_notice_secs,
        liveness_timeout_secs=options.clocks.liveness_timeout_secs, resume=options.resume,
        resume_partial=options.resume_partial)
    api = Api.connect()
    controller = KubernetesController(api, manifests.namespace, manifests.launch_id,
                                      program.name, options.settings.allow_changes)
    for obj in manifests.objects:
        try:
            api.create(manifests.namespace, obj)
        except api.refused as e:
            controller.delete_all(grace_period_seconds=0)
            why = (" (allow_changes=True makes the controller a Role: launching then needs "
                   "the right to make Roles there)" if obj["kind"] in _ACCESS_KINDS else "")
            raise KubernetesError(f"Kubernetes refused {obj['kind']} "
                                  f"{obj['metadata']['name']} of program {program.name!r} "
                                  f"(namespace {manifests.namespace}): {message_of(e)}"
                                  f"{why}") from e
    return controller


def attach(run_id: str, namespace: str = "default") -> KubernetesController:
    """The controller of launch `run_id` (`controller.run_id`) in `namespace`.

    Raises:
      LaunchError: no such launch there (the launches there are named).
    """
    api = Api.connect()
    jobs = controller_jobs(api, namespace, run_id)
    if not jobs:
        names = sorted(job.metadata.labels[LAUNCH_LABEL] for job in controller_jobs(api, namespace))
        raise errors.LaunchError(f"No launch {run_id!r} in namespace {namespace}; launches "
                                 f"there: {', '.join(names) or 'none'}")
    annotations = jobs[0].metadata.annotations or {}
    return KubernetesController(api, namespace, run_id,
                                annotations.get(NAME_ANNOTATION, run_id),
                                annotations.get(CHANGES_ANNOTATION) == "allowed")


class KubernetesController(RemoteController):
    """The controller of a program running in a Kubernetes cluster: `wait()`, `stop()`,
    `kill()`, `stop_and_wait()`, `exit_codes()`, `restarts()` and `with`, as `lp.Controller`;
    with KubernetesSettings(allow_changes=True) also `scale`, `plan`, `apply` and `status`,
    asked of the controller through the API (relay.py). `run_id` is the launch's id (the
    `launchpad.dev/launch` label of its objects)."""

    def __init__(self, api: Api, namespace: str, launch_id: str, program_name: str,
                 changes_allowed: bool = False):
        self.run_id = launch_id
        self.namespace = namespace
        self.program_name = program_name
        self.failure: errors.NodeFailedError | errors.StateError | None = None
        self.stop_reason = ""
        self._api = api
        self._job = names.controller_name(launch_id)
        self._selector = f"{LAUNCH_LABEL}={launch_id}"
        self._outcome: dict[str, Any] | None = None
        self._deleted = False
        self._changes_allowed = changes_allowed
        self._token: str | None = None  # the program's, once a question needed it

    def delete_all(self, grace_period_seconds: int | None = None) -> None:
        """Deletes every object of the launch (Foreground: a Job goes once its pods have)."""
        self._deleted = True
        if grace_period_seconds == 0:  # a Job's pods would get their own grace period
            self._api.core.delete_collection_namespaced_pod(
                self.namespace, label_selector=self._selector, grace_period_seconds=0)
        self._api.delete_labelled(self.namespace, self._selector,
                                  access=self._changes_allowed,
                                  grace_period_seconds=grace_period_seconds)

    def stop(self, reason: str = "") -> None:
        """Stops the program: its objects are deleted; each pod gets SIGTERM and stops
        gracefully (the grace period). Safe to call more than once."""
        if not self._deleted:
            self.stop_reason = self.stop_reason or reason or (
                "stopped: its Kubernetes objects were deleted")
        self.delete_all()

    def kill(self) -> None:
        """Deletes the program's pods at once (no grace period), then every object."""
        if not self._deleted:
            self.stop_reason = f"killed: the pods of launch {self.run_id} were deleted"
        self.delete_all(grace_period_seconds=0)

    def _wait(self, timeout: float | None) -> bool:
        """Blocks until the controller's Job has completed or failed (or was deleted).

        Returns:
          True once the program has ended; False if `timeout` seconds passed first.
        Raises:
          NodeFailedError: a node failed (the first one), with its traceback.
          StateError: the controller refused to resume the launch named by `resume=` (the
            launch's objects are deleted then: none of its nodes ran).
          KubernetesError: the controller's Job ended without saying how the program did.
        """
        if self._outcome is None:
            ended = self._follow(None if timeout is None else time.monotonic() + timeout)
            if ended is None:
                return False
            self._outcome = self._read_outcome()
            if self._outcome is None:
                if self._deleted or ended == "deleted":
                    return True
                raise KubernetesError(
                    f"The controller of program {self.program_name!r} ended ({ended}) without "
                    f"saying how the program did; see `kubectl logs -n {self.namespace} "
                    f"job/{self._job}`")
            self.stop_reason = self.stop_reason or self._outcome["stop_reason"]
            if self._outcome.get("refused"):  # no node ran: nothing of the launch is kept
                self.failure = errors.StateError(self._outcome["refused"])
                self.delete_all()
            elif self._outcome["failed_node"]:
                self.failure = errors.NodeFailedError(
                    self.program_name, self._outcome["failed_node"], self._outcome["reason"],
                    self._outcome["traceback"])
        if self.failure is not None:
            raise self.failure
        return True

    def _follow(self, deadline: float | None) -> str | None:
        """Watches the controller's Job: 'Complete', 'Failed' or 'deleted'; None at the
        deadline."""
        batch = self._api.batch
        field = f"metadata.name={self._job}"
        while True:
            listed = batch.list_namespaced_job(self.namespace, field_selector=field)
            if not listed.items:
                return "deleted"
            state = job_ended(listed.items[0])
            if state:
                return state
            version = listed.metadata.resource_version
            try:
                while deadline is None or time.monotonic() < deadline:
                    left = _WATCH_SECS if deadline is None else deadline - time.monotonic()
                    for event in self._api.module.watch.Watch().stream(
                            batch.list_namespaced_job, self.namespace, field_selector=field,
                            resource_version=version,
                            timeout_seconds=max(1, min(_WATCH_SECS, int(left)))):
                        if event["type"] == "DELETED":
                            return "deleted"
                        version = event["object"].metadata.resource_version
                        state = job_ended(event["object"])
                        if state:
                            return state
                return None
            except self._api.module.client.ApiException as e:
                if e.status != 410:  # 410 Gone: the version is too old; list again
                    raise

    def _read_outcome(self) -> dict[str, Any] | None:
        """The outcome the controller's pod printed last ({} if it printed none)."""
        pods = self._api.core.list_namespaced_pod(
            self.namespace, label_selector=f"{self._selector},{ROLE_LABEL}=controller").items
        for pod in sorted(pods, key=lambda p: p.metadata.creation_timestamp or 0,
                          reverse=True):
            try:
                log = self._api.core.read_namespaced_pod_log(pod.metadata.name,
                                                             self.namespace)
            except self._api.module.client.ApiException:
                continue  # gone already
            lines = [line for line in log.splitlines() if line.startswith(OUTCOME_PREFIX)]
            if lines:
                return json.loads(lines[-1][len(OUTCOME_PREFIX):])
        return None

    def exit_codes(self) -> dict[str, int | None]:
        """'label/index' -> how each node's last pod ended (None: running or not yet run)."""
        if self._outcome is not None:
            return self._outcome["exit_codes"]
        pods = self._api.core.list_namespaced_pod(
            self.namespace, label_selector=f"{self._selector},{ROLE_LABEL}=node").items
        codes: dict[str, int | None] = {}
        for pod in sorted(pods, key=lambda p: p.metadata.creation_timestamp or 0):
            name = (pod.metadata.annotations or {}).get(NAME_ANNOTATION, pod.metadata.name)
            statuses = (pod.status and pod.status.container_statuses) or []
            ended = statuses[0].state.terminated if statuses and statuses[0].state else None
            codes[name] = ended.exit_code if ended else None
        return codes

    def restarts(self) -> dict[str, int]:
        """'label/index' -> how many times the node was restarted by its group's policy."""
        if self._outcome is not None:
            return self._outcome["restarts"]
        jobs = self._api.batch.list_namespaced_job(
            self.namespace, label_selector=f"{self._selector},{ROLE_LABEL}=node").items
        return {(job.metadata.annotations or {}).get(NAME_ANNOTATION, job.metadata.name):
                (job.status.failed or 0) - (job_ended(job) == "Failed")
                for job in jobs if job.status and job.status.failed}

    def status(self) -> telemetry.ProgramStatus | None:
        """Every node now, as the controller sees it, asked through the API; None once the
        program has ended.

        Raises:
          LaunchError: the launch was made without allow_changes (saying how to look).
        """
        try:
            return self._asked(lambda client: client.status())
        except errors.ProgramStoppedError:
            return None

    def controller_client(self) -> RelayedClient:
        """A client of its controller's protocol, asking through the API (relay.py).

        Raises:
          LaunchError: the launch was made without allow_changes (its controller cannot
            read the API).
          ProgramStoppedError: its controller's Job has ended, or is gone.
        """
        if not self._changes_allowed:
            raise errors.LaunchError(
                f"Kubernetes launch {self.run_id} was made without lp.KubernetesSettings("
                "allow_changes=True): its controller, which answers only on the cluster's "
                "network, may not read questions from the API, nor change the program; its "
                f"pods are `kubectl get pods -n {self.namespace} -l {self._selector}`")
        listed = self._api.batch.list_namespaced_job(
            self.namespace, field_selector=f"metadata.name={self._job}").items
        if not listed or job_ended(listed[0]):
            raise errors.ProgramStoppedError(
                f"Program {self.program_name!r} (launch {self.run_id}) has no controller to "
                "ask: it is not running")
        if self._token is None:  # the launch's Secret, which the asker may read
            secret = self._api.core.read_namespaced_secret(
                names.object_name(self.run_id, ""), self.namespace)
            self._token = base64.b64decode(secret.data[kubernetes_pod.TOKEN_KEY]).decode()
        return RelayedClient(self._api, self.namespace, self.run_id, self._token)
