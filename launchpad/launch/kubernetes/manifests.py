"""The objects a Kubernetes launch makes, as plain dicts: built here, applied by launcher.py
(`launch_type="kubernetes"`) or by the user's own tools (`lp.kubernetes_manifests`).

For launch id L (the program's name and a random suffix), every object labelled
`launchpad.dev/program=<name>` and `launchpad.dev/launch=L`::

    Secret     lp-L              token (+ TLS ca/cert/key)      -> /var/run/launchpad/secret
    ConfigMap  lp-L              binaryData: each node's sealed spec and the controller's
                                 (no secret in them)            -> /var/run/launchpad/specs
    ServiceAccount, Role, RoleBinding  lp-L-controller   only with
                                 KubernetesSettings(allow_changes=True): the controller may
                                 make and delete the launch's Jobs, Services and ConfigMaps
                                 (objects.py's rules), in its namespace only
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
would throttle); groups without an entry request nothing, as services do under Ray. The
objects' shapes are objects.py's, which the controller's pod also uses for the nodes it
starts while the program runs (running_nodes.py).
"""

from __future__ import annotations

import dataclasses
import pickle
import re
import secrets
from collections.abc import Mapping
from typing import Any

import cloudpickle

from launchpad.courier import TLS
from launchpad.launch.kubernetes import names, objects, states
from launchpad.launch.kubernetes import pod as kubernetes_pod
from launchpad.launch.kubernetes.objects import SPECS_MOUNT, ObjectBuilder
from launchpad.launch.kubernetes.settings import KubernetesSettings
from launchpad.launch.runtime import ending
from launchpad.launch.runtime import resources as resources_lib
from launchpad.launch.runtime.resources import Resources
from launchpad.program import Program

CONTROLLER_SPEC = "controller.spec"
_CONFIG_MAP_LIMIT = 1_000_000  # bytes of binaryData (the API refuses objects over 1 MiB)
_RESOURCE_NAME = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*"
                            r"[A-Za-z0-9])?$")


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
    # What the nodes it starts while the program runs are made with (running_nodes.py).
    settings: KubernetesSettings
    resources: dict[str, Resources]


@dataclasses.dataclass(frozen=True)
class Manifests:
    """A launch's objects, in the order they are applied, and the names it is known by."""

    launch_id: str
    namespace: str
    program_name: str
    controller_job: str
    objects: list[dict[str, Any]]


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
    builder = ObjectBuilder(program.name, settings, launch_id)
    token = secrets.token_hex(16)
    controller = builder.controller_name
    specs, services, jobs = {}, [builder.service(controller, "controller")], []
    for node in program.get_all_nodes():
        made = objects.node_objects(
            builder, program, node, token, needs.get(node.label),
            termination_notice_secs=termination_notice_secs,
            liveness_timeout_secs=liveness_timeout_secs, resume=resume)
        specs[made.spec_key] = made.spec
        services.append(made.service)
        jobs.append(made.job)
    specs[CONTROLLER_SPEC] = kubernetes_pod.seal(pickle.dumps(LaunchSpec(
        _pickled(program), termination_notice_secs, liveness_timeout_secs,
        settings.startup_timeout_secs, settings.controller_port,
        f"{controller}.{settings.namespace}.svc", launch_id, resume, resume_partial,
        settings, needs)), token)
    _check_size(program.name, specs)
    access = builder.controller_access() if settings.allow_changes else []
    controller_job = builder.job(
        controller, "controller", program.name,
        ["--kubernetes-controller", f"{SPECS_MOUNT}/{CONTROLLER_SPEC}"],
        settings.controller_resources, backoff_limit=0,
        grace=termination_notice_secs + ending.KILL_AFTER_TERMINATE_SECS,
        port=settings.controller_port, keeps_state=keeps_state,
        service_account=controller if access else None)
    if access:  # what the launching side asks before it asks the controller anything
        controller_job["metadata"].setdefault("annotations", {})[
            names.CHANGES_ANNOTATION] = "allowed"
    made_objects = [builder.secret(objects.secret_data(token, tls)),
                    builder.config_map(specs), *access, *services, controller_job, *jobs]
    return Manifests(launch_id, settings.namespace, program.name, controller,
                     made_objects)


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
