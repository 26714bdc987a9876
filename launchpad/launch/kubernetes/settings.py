"""`lp.KubernetesSettings`: where and how a program's pods run (`lp.launch(..., kubernetes=...)`).

What each node needs is said once for every engine, with `lp.Resources`; what is Kubernetes'
own - the namespace, the image, the service account, pull secrets, node selectors,
tolerations, extra labels, annotations and environment - is said here. Checked when made, so a
mistake is named before anything is built or applied.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from launchpad.launch.runtime.resources import Resources

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
RESERVED_PREFIX = "launchpad.dev/"  # the labels and annotations launchpad sets itself


@dataclasses.dataclass(frozen=True)
class KubernetesSettings:
    """Kubernetes options of a launch.

    Args:
      image: the container image every pod runs (required): it must hold Python with
        launchpad and the program's code importable (the nodes' code is not copied).
      namespace: where every object of the launch is made.
      python: the image's interpreter command (`python -m launchpad.launch ...`).
      image_pull_policy: "Always", "IfNotPresent" or "Never" (None: the cluster's default).
      service_account: the pods' service account (None: the namespace's default).
      image_pull_secrets: names of Secrets for pulling `image` from a private registry.
      node_selector: every pod's nodeSelector, e.g. {"cloud.google.com/gke-nodepool": "a"}.
      tolerations: every pod's tolerations (Kubernetes' own dicts).
      labels, annotations: added to every object (keys under launchpad.dev/ are launchpad's).
      env: variables of every container (plain values; the program's secret never is one).
      controller_port: the port of the controller's Service and pod.
      startup_timeout_secs: how long a pod may take to start (scheduling, pulling the image)
        before its node counts as failed; a node started before its controller waits as long.
      controller_resources: what the controller's pod requests (default one CPU).
      state_volume: a PersistentVolumeClaim the pods of groups that keep state
        (lp.StatePolicy) mount, read-write, for their states: a re-run pod starts from its
        latest. Needed when a group keeps state.
      allow_changes: whether the program may be changed while it runs (`controller.scale`,
        `plan`, `apply`, and `status` from outside the cluster): the launch then gives its
        controller's pod a ServiceAccount whose Role lets it make and delete the launch's
        Jobs, Services and ConfigMaps in `namespace` (so launching needs the right to make
        Roles there). Off by default: no pod of the launch can reach the API.
    """

    image: str | None = None
    namespace: str = "default"
    python: str = "python"
    image_pull_policy: str | None = None
    service_account: str | None = None
    image_pull_secrets: Sequence[str] = ()
    node_selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    tolerations: Sequence[Mapping[str, Any]] = ()
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    controller_port: int = 7070
    startup_timeout_secs: float = 600.0
    controller_resources: Resources = dataclasses.field(default_factory=Resources)
    state_volume: str | None = None
    allow_changes: bool = False

    def __post_init__(self):
        if self.image is not None and (not isinstance(self.image, str) or not self.image):
            raise ValueError(f"KubernetesSettings.image must be an image name, got "
                             f"{self.image!r}")
        if not isinstance(self.namespace, str) or not _DNS_LABEL.match(self.namespace):
            raise ValueError(f"KubernetesSettings.namespace must be a DNS-1123 label (lower "
                             f"case letters, digits and '-'), got {self.namespace!r}")
        if self.image_pull_policy not in (None, *_PULL_POLICIES):
            raise ValueError(f"KubernetesSettings.image_pull_policy must be one of "
                             f"{', '.join(_PULL_POLICIES)} or None, got "
                             f"{self.image_pull_policy!r}")
        for name in ("image_pull_secrets", "tolerations"):
            if isinstance(getattr(self, name), (str, Mapping)):
                raise TypeError(f"KubernetesSettings.{name} must be a list, got "
                                f"{getattr(self, name)!r}")
        for name in ("node_selector", "labels", "annotations", "env"):
            given = getattr(self, name)
            if not isinstance(given, Mapping) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in given.items()):
                raise TypeError(f"KubernetesSettings.{name} must be a dict of strings, got "
                                f"{given!r}")
        for name in ("labels", "annotations"):
            ours = sorted(k for k in getattr(self, name) if k.startswith(RESERVED_PREFIX))
            if ours:
                raise ValueError(f"KubernetesSettings.{name} {ours}: keys under "
                                 f"{RESERVED_PREFIX} are launchpad's own")
        bad = sorted(k for k in self.env if not _ENV_NAME.match(k))
        if bad:
            raise ValueError(f"KubernetesSettings.env has invalid variable names {bad}")
        if (not isinstance(self.controller_port, int) or isinstance(self.controller_port, bool)
                or not 1 <= self.controller_port <= 65535):
            raise ValueError(f"KubernetesSettings.controller_port must be a port (1-65535), "
                             f"got {self.controller_port!r}")
        if not self.startup_timeout_secs > 0:
            raise ValueError(f"KubernetesSettings.startup_timeout_secs must be > 0, got "
                             f"{self.startup_timeout_secs!r}")
        if not isinstance(self.controller_resources, Resources):
            raise TypeError(f"KubernetesSettings.controller_resources must be an "
                            f"lp.Resources, got {self.controller_resources!r}")
        if self.state_volume is not None and not (
                isinstance(self.state_volume, str) and _DNS_LABEL.match(self.state_volume)):
            raise ValueError(f"KubernetesSettings.state_volume must name a "
                             f"PersistentVolumeClaim, got {self.state_volume!r}")
        if not isinstance(self.allow_changes, bool):
            raise TypeError(f"KubernetesSettings.allow_changes must be True or False, got "
                            f"{self.allow_changes!r}")
        if not isinstance(self.python, str) or not self.python:
            raise ValueError(f"KubernetesSettings.python must be a command, got "
                             f"{self.python!r}")
