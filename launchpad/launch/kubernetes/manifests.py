"""The objects a Kubernetes launch makes, as plain dicts: built here, applied by launcher.py
(`launch_type="kubernetes"`) or by the user's own tools (`lp.kubernetes_manifests`).

For launch id L (the program's name and a random suffix), every object labelled
`launchpad.dev/program=<name>` and `launchpad.dev/launch=L`::

    Secret     lp-L              token (+ TLS ca/cert/key)      -> /var/run/launchpad/secret
    ConfigMap  lp-L              binaryData: each node's sealed spec and the controller's
                                 (no secret in them)            -> /var/run/launchpad/specs
    Service    lp-L-controller   headless, the controller's port: nodes dial
                                 lp-L-controller.<namespace>.svc:<port>
    Job        lp-L-controller   python -m launchpad.launch --kubernetes-controller SPEC
    Service    lp-L-<node>       headless, per node: a stable DNS name for its pod
    Job        lp-L-<node>       python -m launchpad.launch --pod-spec SPEC; backoffLimit = its
                                 group's max_restarts, so Kubernetes re-runs a failed pod

Containers get only the path of the secret (`LAUNCHPAD_SECRET_DIR`), never the secret: each
spec is sealed with the token (pod.py) and carries an empty token and no TLS; the node
reads both from the mounted Secret (`pod.read_node_spec`). Resources come from
`lp.Resources` (requests; limits for memory, GPUs and extra resources, none for CPU, which
would throttle); groups without an entry request nothing, as services do under Ray.
"""

from __future__ import annotations

import base64
import dataclasses
import math
import pickle
import re
import secrets
from collections.abc import Mapping
from typing import Any

import cloudpickle

from launchpad.context import LaunchType
from launchpad.courier import TLS
from launchpad.launch.kubernetes import names, states
from launchpad.launch.kubernetes import pod as kubernetes_pod
from launchpad.launch.kubernetes.settings import KubernetesSettings
from launchpad.launch.runtime import ending, spec
from launchpad.launch.runtime import resources as resources_lib
from launchpad.launch.runtime.resources import Resources
from launchpad.program import Program

SECRET_MOUNT = "/var/run/launchpad/secret"
SPECS_MOUNT = "/var/run/launchpad/specs"
CONTROLLER_SPEC = "controller.spec"
STOP_SIGNALS = {"SIGTERM": "Kubernetes is deleting the pod"}
_CONFIG_MAP_LIMIT = 1_000_000  # bytes of binaryData (the API refuses objects over 1 MiB)
_RESOURCE_NAME = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*"
                            r"[A-Za-z0-9])?$")
_SPARE_SECS = 5  # terminationGracePeriodSeconds beyond what the stop itself takes


@dataclasses.dataclass
class LaunchSpec:
    """What the controller's pod needs to control the program (kubernetes/controller_pod.py)."""

    program: bytes  # cloudpickle of the Program
    termination_notice_secs: float
    liveness_timeout_secs: float
    startup_timeout_secs: float
    port: int
    service_host: str  # the controller Service's DNS name, which nodes dial
    launch_id: str
    resume: str | None  # the launch whose states the stateful nodes start from
    resume_partial: bool


@dataclasses.dataclass(frozen=True)
class Manifests:
    """A launch's objects, in the order they are applied, and the names it is known by."""

    launch_id: str
    namespace: str
    program_name: str
    controller_job: str
    objects: list[dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class _SpecContext:
    """What `spec.make_spec` reads of a program's context: no token and no TLS, by design."""

    program_name: str
    controller_address: str
    token: str = ""
    tls: TLS | None = None
    launch_type: str = LaunchType.KUBERNETES.value
    one_host: bool = False  # (pods run on the cluster's hosts)


def kubernetes_manifests(program: Program, resources: Mapping[str, Resources] | None = None,
                         settings: KubernetesSettings | None = None, *,
                         tls: TLS | bool | None = None, termination_notice_secs: float = 10.0,
                         liveness_timeout_secs: float = 10.0, resume: str | None = None,
                         resume_partial: bool = False) -> list[dict[str, Any]]:
    """The Kubernetes objects that run `program`, as plain dicts, applying nothing.

    Apply them in order (e.g. `kubectl apply -f`); delete them by the label
    `launchpad.dev/launch=<id>` they all carry. The Secret among them holds the program's
    token (and TLS key): treat the output as secret.

    Args:
      program: the program.
      resources: group label -> lp.Resources (groups without one request nothing).
      settings: lp.KubernetesSettings; its `image` is required.
      tls: an lp.TLS, or True for certificates made now; None: plaintext (with the token).
      termination_notice_secs: the grace period nodes get after a stop.
      liveness_timeout_secs: a node silent this long is lost.
      resume: the id of an earlier launch (its `launchpad.dev/launch` label) whose states,
        on the same state volume, the stateful nodes start from (kubernetes/states.py).
      resume_partial: resume even where the programs' groups differ.
    Raises:
      ValueError, TypeError: bad input, named.
    """
    if tls is True:
        tls = TLS.generate()
    return build(program, resources, settings, tls=tls or None,
                 termination_notice_secs=termination_notice_secs,
                 liveness_timeout_secs=liveness_timeout_secs, resume=resume,
                 resume_partial=resume_partial).objects


def check_settings(settings: Any) -> KubernetesSettings:
    """`settings`, if it is a KubernetesSettings with an image.

    Raises:
      TypeError, ValueError: it is not, named.
    """
    if not isinstance(settings, KubernetesSettings):
        raise TypeError("Kubernetes launches need kubernetes=lp.KubernetesSettings(image=...) "
                        f"(the pods' image, holding launchpad and the program's code), got "
                        f"{settings!r}")
    if settings.image is None:
        raise ValueError("lp.KubernetesSettings(image=...) is required: the container image "
                         "every pod runs, holding Python, launchpad and the program's code")
    return settings


def build(program: Program, resources: Mapping[str, Resources] | None,
          settings: KubernetesSettings | None, *, tls: TLS | None,
          termination_notice_secs: float, liveness_timeout_secs: float,
          resume: str | None = None, resume_partial: bool = False) -> Manifests:
    """The launch's objects (see the module doc); what `kubernetes_manifests` returns and
    kubernetes/launcher.py applies."""
    if not isinstance(program, Program) or not program.get_all_nodes():
        raise ValueError(f"Kubernetes manifests need a Program with nodes, got {program!r}")
    settings = check_settings(settings)
    if kubernetes_pod.SECRET_DIR_ENV in settings.env:
        raise ValueError(f"KubernetesSettings.env must not set {kubernetes_pod.SECRET_DIR_ENV} "
                         "(launchpad's own)")
    needs = dict(resources or {})
    resources_lib.per_group(list(program.groups), program.name, needs)  # names and types
    for group, entry in needs.items():
        bad = sorted(k for k in entry.extra if not _RESOURCE_NAME.match(str(k)))
        if bad:
            raise ValueError(f"resources[{group!r}].extra names {bad}, which are not "
                             "Kubernetes resource names (e.g. 'example.com/fpga')")
    keeps_state = states.check(program, settings, resume)
    launch_id = names.new_launch_id(program.name)
    builder = _Builder(program, settings, launch_id, termination_notice_secs)
    token = secrets.token_hex(16)
    controller = names.controller_name(launch_id)
    host = f"{controller}.{settings.namespace}.svc"
    context = _SpecContext(program.name, f"{host}:{settings.controller_port}")
    specs, services, jobs = {}, [builder.service(controller, "controller")], []
    for node in program.get_all_nodes():
        name = names.object_name(launch_id, f"{names.dns_label(node.label)}-{node.index}")
        state = states.node_spec(program, node.label, launch_id, resume)
        node_spec = spec.make_spec(
            node, context, node.label, node.index,
            termination_notice_secs=termination_notice_secs,
            heartbeat_secs=spec.CLUSTER_HEARTBEAT_SECS,
            liveness_timeout_secs=liveness_timeout_secs, bind_host="0.0.0.0",
            stop_signals=STOP_SIGNALS, state=state)
        node_spec = dataclasses.replace(node_spec, sys_path=[], argv=[program.name],
                                        controller_wait_secs=settings.startup_timeout_secs)
        specs[f"{name}.spec"] = kubernetes_pod.seal(spec.encode(node_spec), token)
        policy = program.restart_policies.get(node.label)
        services.append(builder.service(name, "node"))
        jobs.append(builder.job(
            name, "node", node.name, ["--pod-spec", f"{SPECS_MOUNT}/{name}.spec"],
            needs.get(node.label), backoff_limit=policy.max_restarts if policy else 0,
            grace=termination_notice_secs, keeps_state=state is not None))
    specs[CONTROLLER_SPEC] = kubernetes_pod.seal(pickle.dumps(LaunchSpec(
        _pickled(program), termination_notice_secs, liveness_timeout_secs,
        settings.startup_timeout_secs, settings.controller_port, host, launch_id, resume,
        resume_partial)), token)
    _check_size(program.name, specs)
    controller_job = builder.job(
        controller, "controller", program.name,
        ["--kubernetes-controller", f"{SPECS_MOUNT}/{CONTROLLER_SPEC}"],
        settings.controller_resources, backoff_limit=0,
        grace=termination_notice_secs + ending.KILL_AFTER_TERMINATE_SECS,
        port=settings.controller_port, keeps_state=keeps_state)
    objects = [builder.secret(_secret_data(token, tls)), builder.config_map(specs),
               *services, controller_job, *jobs]
    return Manifests(launch_id, settings.namespace, program.name, controller, objects)


class _Builder:
    """Makes the objects of one launch (their metadata, pods and volumes alike)."""

    def __init__(self, program: Program, settings: KubernetesSettings, launch_id: str,
                 termination_notice_secs: float):
        self._settings = settings
        self._launch_id = launch_id
        self._selector = {names.LAUNCH_LABEL: launch_id}
        self._labels = {**settings.labels, names.PROGRAM_LABEL: names.label_value(program.name),
                        names.LAUNCH_LABEL: launch_id}
        self._config = names.object_name(launch_id, "")
        self._grace = termination_notice_secs

    def _metadata(self, name: str, role: str | None = None, node: str = "",
                  own_name: str = "") -> dict[str, Any]:
        labels = dict(self._labels)
        if role:
            labels[names.ROLE_LABEL] = role
        if node:
            labels[names.NODE_LABEL] = node
        annotations = dict(self._settings.annotations)
        if own_name:
            annotations[names.NAME_ANNOTATION] = own_name
        metadata = {"name": name, "namespace": self._settings.namespace, "labels": labels}
        return {**metadata, "annotations": annotations} if annotations else metadata

    def secret(self, data: dict[str, bytes]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Secret", "metadata": self._metadata(self._config),
                "type": "Opaque", "immutable": True, "data": _base64(data)}

    def config_map(self, specs: dict[str, bytes]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": self._metadata(self._config), "immutable": True,
                "binaryData": _base64(specs)}

    def service(self, name: str, role: str) -> dict[str, Any]:
        """A headless Service naming the pod of Job `name` (its DNS name resolves to the pod's
        address as soon as the pod has one: publishNotReadyAddresses)."""
        service_spec: dict[str, Any] = {
            "clusterIP": "None", "publishNotReadyAddresses": True,
            "selector": {**self._selector, names.NODE_LABEL: name}}
        if role == "controller":
            port = self._settings.controller_port
            service_spec["ports"] = [{"name": "control", "port": port, "targetPort": port,
                                      "protocol": "TCP"}]
        return {"apiVersion": "v1", "kind": "Service", "metadata": self._metadata(name, role),
                "spec": service_spec}

    def job(self, name: str, role: str, own_name: str, arguments: list[str],
            needs: Resources | None, *, backoff_limit: int, grace: float,
            port: int | None = None, keeps_state: bool = False) -> dict[str, Any]:
        """A Job of one pod running `python -m launchpad.launch ARGUMENTS` (which mounts the
        state volume, if `keeps_state`)."""
        settings = self._settings
        spec_file = arguments[-1].rsplit("/", 1)[1]
        container: dict[str, Any] = {
            "name": role, "image": settings.image,
            "command": [settings.python, "-m", "launchpad.launch", *arguments],
            "env": [{"name": kubernetes_pod.SECRET_DIR_ENV, "value": SECRET_MOUNT},
                    {"name": "PYTHONUNBUFFERED", "value": "1"},
                    *({"name": k, "value": v} for k, v in settings.env.items())],
            "volumeMounts": [
                {"name": "launchpad-secret", "mountPath": SECRET_MOUNT, "readOnly": True},
                {"name": "launchpad-specs", "mountPath": SPECS_MOUNT, "readOnly": True}]}
        if settings.image_pull_policy:
            container["imagePullPolicy"] = settings.image_pull_policy
        if needs is not None:
            container["resources"] = _resources(needs)
        if port is not None:
            container["ports"] = [{"name": "control", "containerPort": port,
                                   "protocol": "TCP"}]
        pod: dict[str, Any] = {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": math.ceil(grace) + _SPARE_SECS,
            "enableServiceLinks": False, "containers": [container],
            "volumes": [
                {"name": "launchpad-secret",
                 "secret": {"secretName": self._config, "defaultMode": 0o400}},
                {"name": "launchpad-specs",
                 "configMap": {"name": self._config, "defaultMode": 0o400,
                               "items": [{"key": spec_file, "path": spec_file}]}}]}
        if keeps_state:
            container["volumeMounts"].append({"name": "launchpad-state",
                                              "mountPath": states.STATE_MOUNT})
            pod["volumes"].append({"name": "launchpad-state", "persistentVolumeClaim": {
                "claimName": settings.state_volume}})
        if settings.service_account:
            pod["serviceAccountName"] = settings.service_account
        else:
            pod["automountServiceAccountToken"] = False  # nothing of launchpad's needs it
        if settings.image_pull_secrets:
            pod["imagePullSecrets"] = [{"name": s} for s in settings.image_pull_secrets]
        if settings.node_selector:
            pod["nodeSelector"] = dict(settings.node_selector)
        if settings.tolerations:
            pod["tolerations"] = [dict(t) for t in settings.tolerations]
        pod_metadata = self._metadata(name, role, name, own_name)
        template = {"metadata": {"labels": pod_metadata["labels"],
                                 "annotations": pod_metadata["annotations"]}, "spec": pod}
        return {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": self._metadata(name, role, name, own_name),
                "spec": {"backoffLimit": backoff_limit, "template": template}}


def _resources(needs: Resources) -> dict[str, Any]:
    requests = {"cpu": str(needs.cpus)}
    limits: dict[str, str] = {}
    if needs.memory_mb is not None:
        requests["memory"] = limits["memory"] = f"{needs.memory_mb}Mi"
    if needs.gpus:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(needs.gpus)
    for key, value in needs.extra.items():
        requests[str(key)] = limits[str(key)] = str(value)
    return {"requests": requests, **({"limits": limits} if limits else {})}


def _secret_data(token: str, tls: TLS | None) -> dict[str, bytes]:
    data = {kubernetes_pod.TOKEN_KEY: token.encode()}
    if tls is not None:
        keys = kubernetes_pod.TLS_KEYS
        data |= {keys["ca"]: tls.ca, keys["cert"]: tls.cert, keys["key"]: tls.key,
                 kubernetes_pod.SERVER_NAME_KEY: tls.server_name.encode()}
    return data


def _pickled(program: Program) -> bytes:
    try:
        return cloudpickle.dumps(program)
    except Exception as e:
        raise ValueError(f"Program {program.name!r} cannot be serialized for its controller's "
                         f"pod ({type(e).__name__}: {e})") from e


def _check_size(program_name: str, specs: dict[str, bytes]) -> None:
    total = sum(len(data) * 4 // 3 for data in specs.values())  # base64
    if total > _CONFIG_MAP_LIMIT:
        largest = max(specs, key=lambda key: len(specs[key]))
        raise ValueError(
            f"The node specs of program {program_name!r} take {total} bytes, more than a "
            f"ConfigMap holds (1 MiB); the largest is {largest} ({len(specs[largest])} bytes): "
            "pass large data to nodes as files or through a node, not as arguments")


def _base64(data: dict[str, bytes]) -> dict[str, str]:
    return {key: base64.b64encode(value).decode() for key, value in data.items()}
