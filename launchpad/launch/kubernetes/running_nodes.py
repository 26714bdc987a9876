"""The nodes a Kubernetes program's controller starts and removes while the program runs (a
group scaled, a node replaced by `apply`, a lost node run again): their objects, made and
deleted by the controller's pod itself, through the API its ServiceAccount may use
(lp.KubernetesSettings(allow_changes=True); objects.py's Role).

Each start is one batch, k: a ConfigMap `lp-L-specs-ck` (role `specs`) of the batch's
sealed specs, and per node a Service and a Job `lp-L-<label>-<index>-ck`, shaped as the
launch's own (objects.node_objects), so a name never meets a Job of that place still being
deleted. A removed node's Job and Service are deleted (Foreground), and a batch's ConfigMap
once none of its nodes is left. A node whose run was lost (pod_worker.py) is run again as a
batch of its own, its old objects deleted first. Kubernetes refusing an object undoes the
batch and names the object and the API's reason; nothing of it starts.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable

from absl import logging

from launchpad.launch.kubernetes import names, objects
from launchpad.launch.kubernetes.api import Api, message_of
from launchpad.launch.kubernetes.manifests import LaunchSpec
from launchpad.launch.kubernetes.objects import ObjectBuilder
from launchpad.launch.runtime import errors
from launchpad.program import Program


class RunningNodes:
    """The objects of the nodes of a running Kubernetes program (see the module doc).

    Args:
      api: the API, as the controller's ServiceAccount.
      launch_spec: the launch's (its settings, resources and clocks).
      program: the running program (the nodes' place in it).
      token: the program's token, which seals the specs.
      watch: starts following the pods of nodes whose objects were made (their
        PodWorkers, added to the controller).
    """

    def __init__(self, api: Api, launch_spec: LaunchSpec, program: Program, token: str,
                 watch: Callable[[list], None]):
        self._api = api
        self._spec = launch_spec
        self._program = program
        self._token = token
        self._watch = watch
        self._builder = ObjectBuilder(program.name, launch_spec.settings,
                                      launch_spec.launch_id)
        self._namespace = launch_spec.settings.namespace
        self._batches = itertools.count(1)
        self._lock = threading.Lock()
        # node name -> (its Job's name, which its Service shares; its batch's ConfigMap or
        # "" for the launch's own): the launch's nodes at first.
        self._objects: dict[str, tuple[str, str]] = {
            node.name: (names.object_name(launch_spec.launch_id,
                                          f"{names.dns_label(node.label)}-{node.index}"), "")
            for node in program.get_all_nodes()}
        self._nodes = {node.name: node for node in program.get_all_nodes()}  # as now

    def start(self, nodes: list) -> None:
        """Makes the objects of `nodes` (one batch), then follows their pods.

        Raises:
          LaunchError: Kubernetes refused one of them (named; the batch is undone).
        """
        self._make(nodes)
        self._watch(nodes)

    def rerun(self, node_name: str) -> None:
        """Runs node `node_name` again on objects of its own, its old ones deleted first
        (its run was lost: its PodWorker, which follows it still, waits for the new pod).

        Raises:
          LaunchError: Kubernetes refused one of them (named).
        """
        with self._lock:
            node = self._nodes[node_name]
        self.removed([node_name])
        self._make([node])

    def _make(self, nodes: list) -> None:
        batch = f"c{next(self._batches)}"
        specs_name = names.object_name(self._spec.launch_id, f"specs-{batch}")
        made = [objects.node_objects(
            self._builder, self._program, node, self._token,
            self._spec.resources.get(node.label),
            termination_notice_secs=self._spec.termination_notice_secs,
            liveness_timeout_secs=self._spec.liveness_timeout_secs, suffix=batch,
            specs_from=specs_name) for node in nodes]
        wanted = [self._builder.config_map({m.spec_key: m.spec for m in made}, specs_name,
                                           "specs")]
        for node_objects in made:
            wanted += [node_objects.service, node_objects.job]
        created: list[dict] = []
        try:
            for obj in wanted:
                self._api.create(self._namespace, obj)
                created.append(obj)
        except self._api.refused as e:
            refused = wanted[len(created)]
            for made_obj in reversed(created):
                self._api.delete(self._namespace, made_obj["kind"], made_obj["metadata"]["name"])
            raise errors.LaunchError(
                f"Kubernetes refused {refused['kind']} {refused['metadata']['name']} for "
                f"{', '.join(node.name for node in nodes)} of program {self._program.name!r} "
                f"(namespace {self._namespace}): {message_of(e)}") from e
        with self._lock:
            for node, node_objects in zip(nodes, made, strict=True):
                self._objects[node.name] = (node_objects.job["metadata"]["name"], specs_name)
                self._nodes[node.name] = node

    def removed(self, node_names: list[str]) -> None:
        """Deletes the objects of nodes that are no more (they have ended)."""
        with self._lock:
            gone = [self._objects.pop(name) for name in node_names if name in self._objects]
            still_used = {specs for _, specs in self._objects.values()}
        doomed = [("Job", job) for job, _ in gone] + [("Service", job) for job, _ in gone]
        doomed += [("ConfigMap", specs)
                   for specs in sorted({specs for _, specs in gone} - still_used - {""})]
        for kind, name in doomed:
            try:
                self._api.delete(self._namespace, kind, name)
            except self._api.refused as e:  # the change is made; only an ended object stays
                logging.warning("Could not delete %s %s of program %r (namespace %s): %s",
                                kind, name, self._program.name, self._namespace,
                                message_of(e))
