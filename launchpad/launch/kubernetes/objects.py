"""The shapes of a Kubernetes launch's objects, as plain dicts: what manifests.py lays out at
launch and the controller's pod makes while the program runs (running_nodes.py).

Every object is named by names.py, carries the launch's labels and the settings' own, and
is built here only: a node's Job, Service and sealed spec (`node_objects`) come out the same
whether the launch made them or the program grew them.
"""

from __future__ import annotations

import base64
import dataclasses
import math
from typing import Any

from launchpad.context import LaunchType
from launchpad.courier import TLS
from launchpad.launch.kubernetes import names, states
from launchpad.launch.kubernetes import pod as kubernetes_pod
from launchpad.launch.kubernetes.settings import KubernetesSettings
from launchpad.launch.runtime import spec
from launchpad.launch.runtime.resources import Resources
from launchpad.program import Program

SECRET_MOUNT = "/var/run/launchpad/secret"
SPECS_MOUNT = "/var/run/launchpad/specs"
STOP_SIGNALS = {"SIGTERM": "Kubernetes is deleting the pod"}
_SPARE_SECS = 5  # terminationGracePeriodSeconds beyond what the stop itself takes
# The taints of a host Kubernetes has lost touch with: a pod is evicted once it no longer
# tolerates them, and only then does its Job run another.
_HOST_LOST_TAINTS = ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")
# What a controller that changes its program may do in its namespace (its Role): make and
# delete the Jobs, Services and spec ConfigMaps of the nodes it starts, and read, answer
# and delete the questions asked of it (relay.py).
_CONTROLLER_RULES = [
    {"apiGroups": [""], "resources": ["configmaps"],
     "verbs": ["get", "list", "watch", "create", "delete"]},
    {"apiGroups": [""], "resources": ["services"], "verbs": ["create", "delete"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "delete"]}]


@dataclasses.dataclass(frozen=True)
class SpecContext:
    """What `spec.make_spec` reads of a program's context: no token and no TLS, by design
    (a pod reads both from the mounted Secret)."""

    program_name: str
    controller_address: str
    token: str = ""
    tls: TLS | None = None
    launch_type: str = LaunchType.KUBERNETES.value
    one_host: bool = False  # (pods run on the cluster's hosts)


@dataclasses.dataclass(frozen=True)
class NodeObjects:
    """A node's objects: its sealed spec (a ConfigMap's key), its Service and its Job."""

    spec_key: str
    spec: bytes
    service: dict[str, Any]
    job: dict[str, Any]


class ObjectBuilder:
    """Makes the objects of one launch (their metadata, pods and volumes alike)."""

    def __init__(self, program_name: str, settings: KubernetesSettings, launch_id: str):
        self.settings = settings
        self.launch_id = launch_id
        self._selector = {names.LAUNCH_LABEL: launch_id}
        self._labels = {**settings.labels, names.PROGRAM_LABEL: names.label_value(program_name),
                        names.LAUNCH_LABEL: launch_id}
        self.config_name = names.object_name(launch_id, "")  # its Secret and specs' ConfigMap
        self.controller_name = names.controller_name(launch_id)

    def metadata(self, name: str, role: str | None = None, node: str = "",
                 own_name: str = "") -> dict[str, Any]:
        labels = dict(self._labels)
        if role:
            labels[names.ROLE_LABEL] = role
        if node:
            labels[names.NODE_LABEL] = node
        annotations = dict(self.settings.annotations)
        if own_name:
            annotations[names.NAME_ANNOTATION] = own_name
        metadata = {"name": name, "namespace": self.settings.namespace, "labels": labels}
        return {**metadata, "annotations": annotations} if annotations else metadata

    def secret(self, data: dict[str, bytes]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Secret",
                "metadata": self.metadata(self.config_name), "type": "Opaque",
                "immutable": True, "data": base64_of(data)}

    def config_map(self, data: dict[str, bytes], name: str = "",
                   role: str | None = None) -> dict[str, Any]:
        """An immutable ConfigMap of `data` (the launch's specs, unless `name` is another)."""
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": self.metadata(name or self.config_name, role), "immutable": True,
                "binaryData": base64_of(data)}

    def service(self, name: str, role: str) -> dict[str, Any]:
        """A headless Service naming the pod of Job `name` (its DNS name resolves to the pod's
        address as soon as the pod has one: publishNotReadyAddresses)."""
        service_spec: dict[str, Any] = {
            "clusterIP": "None", "publishNotReadyAddresses": True,
            "selector": {**self._selector, names.NODE_LABEL: name}}
        if role == "controller":
            port = self.settings.controller_port
            service_spec["ports"] = [{"name": "control", "port": port, "targetPort": port,
                                      "protocol": "TCP"}]
        return {"apiVersion": "v1", "kind": "Service", "metadata": self.metadata(name, role),
                "spec": service_spec}

    def controller_access(self) -> list[dict[str, Any]]:
        """The controller's ServiceAccount, its Role (`_CONTROLLER_RULES`, in the launch's
        namespace only) and their RoleBinding: for a launch whose program may change."""
        name = self.controller_name
        return [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": self.metadata(name)},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": self.metadata(name), "rules": _CONTROLLER_RULES},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": self.metadata(name),
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                         "name": name},
             "subjects": [{"kind": "ServiceAccount", "name": name,
                           "namespace": self.settings.namespace}]}]

    def job(self, name: str, role: str, own_name: str, arguments: list[str],
            needs: Resources | None, *, backoff_limit: int, grace: float,
            port: int | None = None, keeps_state: bool = False, specs_from: str = "",
            service_account: str | None = None,
            evicted_after_secs: float | None = None) -> dict[str, Any]:
        """A Job of one pod running `python -m launchpad.launch ARGUMENTS` (whose last is
        its spec file, from ConfigMap `specs_from`, else the launch's), which mounts the
        state volume if `keeps_state`, and runs as `service_account` if given (else the
        settings'). With `evicted_after_secs`, its pod tolerates an unreachable or not-ready
        host only that long (Kubernetes' default: 300 s), where the settings' tolerations say
        nothing of those: a node that restarts is run again that much sooner."""
        settings = self.settings
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
            container["resources"] = resources_of(needs)
        if port is not None:
            container["ports"] = [{"name": "control", "containerPort": port,
                                   "protocol": "TCP"}]
        pod: dict[str, Any] = {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": math.ceil(grace) + _SPARE_SECS,
            "enableServiceLinks": False, "containers": [container],
            "volumes": [
                {"name": "launchpad-secret",
                 "secret": {"secretName": self.config_name, "defaultMode": 0o400}},
                {"name": "launchpad-specs",
                 "configMap": {"name": specs_from or self.config_name, "defaultMode": 0o400,
                               "items": [{"key": spec_file, "path": spec_file}]}}]}
        if keeps_state:
            container["volumeMounts"].append({"name": "launchpad-state",
                                              "mountPath": states.STATE_MOUNT})
            pod["volumes"].append({"name": "launchpad-state", "persistentVolumeClaim": {
                "claimName": settings.state_volume}})
        account = service_account or settings.service_account
        if account:
            pod["serviceAccountName"] = account
        else:
            pod["automountServiceAccountToken"] = False  # nothing of launchpad's needs it
        if settings.image_pull_secrets:
            pod["imagePullSecrets"] = [{"name": s} for s in settings.image_pull_secrets]
        if settings.node_selector:
            pod["nodeSelector"] = dict(settings.node_selector)
        tolerations = [dict(t) for t in settings.tolerations]
        if evicted_after_secs is not None:
            given = {t.get("key") for t in tolerations}
            tolerations += [{"key": key, "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": math.ceil(evicted_after_secs)}
                            for key in _HOST_LOST_TAINTS if key not in given]
        if tolerations:
            pod["tolerations"] = tolerations
        pod_metadata = self.metadata(name, role, name, own_name)
        template = {"metadata": {"labels": pod_metadata["labels"],
                                 "annotations": pod_metadata["annotations"]}, "spec": pod}
        return {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": self.metadata(name, role, name, own_name),
                "spec": {"backoffLimit": backoff_limit, "template": template}}


def node_objects(builder: ObjectBuilder, program: Program, node: Any, token: str,
                 needs: Resources | None, *, termination_notice_secs: float,
                 liveness_timeout_secs: float, resume: str | None = None,
                 suffix: str = "", specs_from: str = "") -> NodeObjects:
    """The objects that run `node` of `program`: `lp-L-<label>-<index>[-suffix]` (a suffix
    names a node started while the program runs, apart from one of its place that is still
    going), its spec sealed with `token` and read from ConfigMap `specs_from`.

    Raises:
      NodeSerializationError: the node cannot be pickled (named, with the reason).
    """
    settings = builder.settings
    part = f"{names.dns_label(node.label)}-{node.index}" + (f"-{suffix}" if suffix else "")
    name = names.object_name(builder.launch_id, part)
    state = states.node_spec(program, node.label, builder.launch_id, resume)
    context = SpecContext(program.name, f"{builder.controller_name}.{settings.namespace}.svc:"
                                        f"{settings.controller_port}")
    node_spec = spec.make_spec(
        node, context, node.label, node.index, termination_notice_secs=termination_notice_secs,
        heartbeat_secs=spec.CLUSTER_HEARTBEAT_SECS, liveness_timeout_secs=liveness_timeout_secs,
        bind_host="0.0.0.0", stop_signals=STOP_SIGNALS, state=state)
    node_spec = dataclasses.replace(node_spec, sys_path=[], argv=[program.name],
                                    controller_wait_secs=settings.startup_timeout_secs)
    policy = program.restart_policies.get(node.label)
    job = builder.job(name, "node", node.name, ["--pod-spec", f"{SPECS_MOUNT}/{name}.spec"],
                      needs, backoff_limit=policy.max_restarts if policy else 0,
                      grace=termination_notice_secs, keeps_state=state is not None,
                      specs_from=specs_from,
                      # (its controller gives it up then: it restarts, or the program fails)
                      evicted_after_secs=liveness_timeout_secs if policy else None)
    return NodeObjects(f"{name}.spec", kubernetes_pod.seal(spec.encode(node_spec), token),
                       builder.service(name, "node"), job)


def resources_of(needs: Resources) -> dict[str, Any]:
    """A container's resources: requests; limits for memory, GPUs and extra resources, none
    for CPU (which would throttle)."""
    requests = {"cpu": str(needs.cpus)}
    limits: dict[str, str] = {}
    if needs.memory_mb is not None:
        requests["memory"] = limits["memory"] = f"{needs.memory_mb}Mi"
    if needs.gpus:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(needs.gpus)
    for key, value in needs.extra.items():
        requests[str(key)] = limits[str(key)] = str(value)
    return {"requests": requests, **({"limits": limits} if limits else {})}


def secret_data(token: str, tls: TLS | None) -> dict[str, bytes]:
    """The launch Secret's keys: the token, and the TLS material when there is some."""
    data = {kubernetes_pod.TOKEN_KEY: token.encode()}
    if tls is not None:
        keys = kubernetes_pod.TLS_KEYS
        data |= {keys["ca"]: tls.ca, keys["cert"]: tls.cert, keys["key"]: tls.key,
                 kubernetes_pod.SERVER_NAME_KEY: tls.server_name.encode()}
    return data


def base64_of(data: dict[str, bytes]) -> dict[str, str]:
    return {key: base64.b64encode(value).decode() for key, value in data.items()}
