"""The Kubernetes API, through the official `kubernetes` client (imported only here, when a
launch, its controller's pod or a question to it needs it): connecting, making objects of
any kind a launch has, and the API's own words when it refuses."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from launchpad.launch.runtime import errors

# kind -> (the Api's part, its create method)
_CREATE = {"Secret": ("core", "create_namespaced_secret"),
           "ConfigMap": ("core", "create_namespaced_config_map"),
           "Service": ("core", "create_namespaced_service"),
           "ServiceAccount": ("core", "create_namespaced_service_account"),
           "Role": ("rbac", "create_namespaced_role"),
           "RoleBinding": ("rbac", "create_namespaced_role_binding"),
           "Job": ("batch", "create_namespaced_job")}
# kind -> (the Api's part, its delete method), for one object by its name
_DELETE = {"ConfigMap": ("core", "delete_namespaced_config_map"),
           "Service": ("core", "delete_namespaced_service"),
           "Job": ("batch", "delete_namespaced_job")}
# What a launch's teardown deletes by its label: the Jobs first (their pods with them); and
# the controller's access, where the launch gave it some.
_DELETE_COLLECTIONS = [("batch", "delete_collection_namespaced_job"),
                       ("core", "delete_collection_namespaced_service"),
                       ("core", "delete_collection_namespaced_config_map"),
                       ("core", "delete_collection_namespaced_secret")]
_DELETE_ACCESS = [("rbac", "delete_collection_namespaced_role_binding"),
                  ("rbac", "delete_collection_namespaced_role"),
                  ("core", "delete_collection_namespaced_service_account")]


def _client() -> Any:
    try:
        import kubernetes
    except ImportError as e:
        raise errors.LaunchError("launch_type='kubernetes' needs the official Kubernetes "
                                 "client: pip install 'launchpad-next[kubernetes]'") from e
    return kubernetes


def check_client() -> None:
    """Raises LaunchError, saying what to install, where the client is missing."""
    _client()


@dataclasses.dataclass
class Api:
    """The Kubernetes API, through the official client."""

    core: Any  # CoreV1Api
    batch: Any  # BatchV1Api
    rbac: Any  # RbacAuthorizationV1Api
    module: Any  # the `kubernetes` package (its watch and exceptions)

    @classmethod
    def connect(cls) -> Api:
        """From the kubeconfig ($KUBECONFIG or ~/.kube/config), else the pod's in-cluster
        configuration (its ServiceAccount's token).

        Raises:
          LaunchError: neither is there (both reasons named).
        """
        kubernetes = _client()
        configuration = kubernetes.client.Configuration()
        try:  # $KUBECONFIG read now (the client reads it once, when it is imported)
            kubernetes.config.load_kube_config(config_file=os.environ.get("KUBECONFIG"),
                                               client_configuration=configuration)
        except (kubernetes.config.ConfigException, OSError) as e:
            try:
                kubernetes.config.load_incluster_config(client_configuration=configuration)
            except kubernetes.config.ConfigException as e2:
                raise errors.LaunchError(f"No Kubernetes cluster to reach: no kubeconfig "
                                         f"({e}), and this is not a pod ({e2})") from e2
        api_client = kubernetes.client.ApiClient(configuration)
        return cls(kubernetes.client.CoreV1Api(api_client),
                   kubernetes.client.BatchV1Api(api_client),
                   kubernetes.client.RbacAuthorizationV1Api(api_client), kubernetes)

    @property
    def refused(self) -> type[Exception]:
        """The client's exception for an answer that is not a success (ApiException)."""
        return self.module.client.ApiException

    def create(self, namespace: str, obj: dict[str, Any]) -> None:
        """Makes `obj` (a dict of one of the kinds a launch has)."""
        part, method = _CREATE[obj["kind"]]
        getattr(getattr(self, part), method)(namespace, obj)

    def delete(self, namespace: str, kind: str, name: str) -> None:
        """Deletes object `name` of `kind` (Foreground: a Job goes once its pods have); one
        already gone is no error."""
        part, method = _DELETE[kind]
        try:
            getattr(getattr(self, part), method)(name, namespace,
                                                 propagation_policy="Foreground")
        except self.refused as e:
            if e.status != 404:
                raise

    def delete_labelled(self, namespace: str, selector: str, *, access: bool,
                        grace_period_seconds: int | None = None) -> None:
        """Deletes every object of a launch's kinds that `selector` selects (Foreground),
        its controller's ServiceAccount, Role and RoleBinding too if `access`."""
        for part, method in _DELETE_COLLECTIONS + (_DELETE_ACCESS if access else []):
            getattr(getattr(self, part), method)(
                namespace, label_selector=selector, propagation_policy="Foreground",
                grace_period_seconds=grace_period_seconds)


def message_of(error: Any) -> str:
    """The API's own message of an ApiException (its Status body), else its reason."""
    try:
        return json.loads(error.body)["message"]
    except (TypeError, ValueError, KeyError):
        return f"{error.status} {error.reason}"
