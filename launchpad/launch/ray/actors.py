"""A Ray launch's steps: each node a Ray actor that runs the node runner, on a Ray
cluster or a Ray of its own.

    lp.launch(program, launch_type="ray",
              resources={"learner": lp.Resources(cpus=4, gpus=1)},
              ray=lp.RaySettings(address="head:6379", placement={"actor": "SPREAD"}))

    connect  -> the Ray cluster (ray/connection.py): joined, or started for the launch
    check    -> every group's needs fit some Ray node (else Ray would leave it pending for
                ever); each placed group gets a placement group, ready or the launch fails
    running  -> each node: a NodeActor (ray/node.py) with the group's num_cpus, num_gpus,
                memory and custom resources, running the node runner on the node's spec
    failures -> an actor that dies (its process killed, its Ray node lost) or a node whose
                heartbeats stop ends the run; the group's lp.RestartPolicy decides, as under
                every launcher (a restart is a new actor)
    stop     -> the same stop sequence (stop event, grace), then each actor's end(), then
                ray.kill; placement groups are removed, and a Ray started here is stopped

The controller stays in the launching process, listening where the Ray nodes reach it (the
interface on the route to the cluster's GCS); nodes bind the interface through which their
Ray node reaches the controller. Groups not given `resources=` reserve no CPU (a service
node would otherwise hold a CPU it hardly uses, and a program of 50 nodes would not fit a
laptop's Ray); give `lp.Resources(cpus=...)` to reserve. Node output comes back through
Ray's log forwarding, prefixed with the node's name.
"""

from __future__ import annotations

import numbers
from typing import Any

from launchpad.launch.ray import connection as ray_connection
from launchpad.launch.ray.node import NodeActor, RayNodeWorker, actor_options
from launchpad.launch.ray.settings import RaySettings
from launchpad.launch.runtime import spec
from launchpad.launch.runtime.controller import Controller
from launchpad.launch.runtime.errors import LaunchError
from launchpad.launch.runtime.launcher import LaunchOptions
from launchpad.launch.runtime.resources import Resources
from launchpad.nodes.python.local_multi_processing import PythonProcess
from launchpad.program import Program


def ray_options(needs: Resources | None) -> dict[str, Any]:
    """An actor's resource options for a node that needs `needs` (None: nothing reserved)."""
    if needs is None:
        return {"num_cpus": 0}
    options: dict[str, Any] = {"num_cpus": needs.cpus, "num_gpus": needs.gpus}
    if needs.memory_mb is not None:
        options["memory"] = needs.memory_mb * 2**20
    if needs.extra:
        options["resources"] = dict(needs.extra)
    return options


def _bundle(options: dict[str, Any]) -> dict[str, float]:
    """The placement-group bundle of one node with these actor options."""
    names = {"num_cpus": "CPU", "num_gpus": "GPU", "memory": "memory"}
    bundle = {names[k]: v for k, v in options.items() if k in names}
    bundle.update(options.get("resources", {}))
    return {k: v for k, v in bundle.items() if v}


def _check_needs(program: Program, given: dict[str, Resources]) -> None:
    """Each group's needs must fit one alive Ray node, else Ray would leave it pending."""
    import ray
    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    for group, needs in given.items():
        for key, value in needs.extra.items():
            if not isinstance(value, numbers.Real) or isinstance(value, bool) or value < 0:
                raise ValueError(f"resources[{group!r}].extra[{key!r}] under ray must be a "
                                 f"custom resource amount (a number >= 0), got {value!r}")
        wanted = _bundle(ray_options(needs))
        if not any(all(node.get(k, 0) >= v for k, v in wanted.items()) for node in nodes):
            have = "; ".join(", ".join(f"{k}={v:g}" for k, v in sorted(node.items())
                                       if not k.startswith("node:")) for node in nodes)
            raise LaunchError(f"Group {group!r} of program {program.name!r} asks for "
                              f"{wanted} per node, and no node of the Ray cluster has that "
                              f"much (its nodes: {have or 'none'})")


class _Placement:
    """The placement groups of a launch's placed groups (RaySettings.placement)."""

    def __init__(self, program: Program, settings: RaySettings, given: dict[str, Resources]):
        self._groups: dict[str, Any] = {}
        unknown = sorted(set(settings.placement) - set(program.groups))
        if unknown:
            raise ValueError(f"RaySettings.placement names groups {unknown} that program "
                             f"{program.name!r} does not have; its groups: "
                             f"{sorted(program.groups)}")
        for group in settings.placement:
            if group not in given:
                raise ValueError(f"RaySettings.placement[{group!r}] needs resources="
                                 f"{{{group!r}: lp.Resources(...)}}: a placement group's "
                                 "bundles must reserve something")
        self._settings = settings
        self._program = program
        self._given = given

    def make(self) -> None:
        """Makes and awaits each placement group; on failure removes them and raises."""
        import ray
        from ray.util import placement_group
        try:
            for group, strategy in self._settings.placement.items():
                bundle = _bundle(ray_options(self._given[group]))
                count = len(self._program.groups[group])
                made = placement_group([bundle] * count, strategy=strategy,
                                       name=f"lp-{self._program.name}-{group}")
                self._groups[group] = made
                try:
                    ray.get(made.ready(), timeout=self._settings.placement_timeout_secs)
                except ray.exceptions.GetTimeoutError:
                    raise LaunchError(
                        f"The Ray cluster found no room for group {group!r} of program "
                        f"{self._program.name!r} within {self._settings.placement_timeout_secs:g}"
                        f"s: {count} bundles of {bundle}, {strategy}") from None
        except BaseException:
            self.remove()
            raise

    def options(self, group: str, position: int) -> dict[str, Any]:
        """The scheduling option of the group's node at `position`, if the group is placed."""
        if group not in self._groups:
            return {}
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
        return {"scheduling_strategy": PlacementGroupSchedulingStrategy(
            placement_group=self._groups[group], placement_group_bundle_index=position)}

    def remove(self) -> None:
        from ray.util import remove_placement_group
        for made in self._groups.values():
            try:
                remove_placement_group(made)
            except Exception:  # noqa: BLE001 - Ray removes what a closed connection made
                pass
        self._groups.clear()


def start_actors(program: Program, controller: Controller, options: LaunchOptions) -> None:
    """Starts each node of `program` as an actor on the Ray cluster (see the module doc)."""
    import ray as ray_module
    settings = options.settings or RaySettings()
    given = dict(options.resources or {})
    ray_connection.connect(settings)
    ray_connection.hold()
    workers: list[RayNodeWorker] = []
    placements: list[_Placement] = []

    def finish() -> None:
        for worker in workers:
            worker.close()  # before the connection goes: Ray ends a process used after it
        for made in placements:
            made.remove()
        ray_connection.release()

    controller.on_finish(finish)  # from here on, a failure's controller.kill() ends it all
    _check_needs(program, given)
    placement = _Placement(program, settings, given)
    placements.append(placement)
    placement.make()
    remote = ray_module.remote(NodeActor)
    runtime_env = {"runtime_env": dict(settings.runtime_env)} if settings.runtime_env else {}
    for group, nodes in program.groups.items():
        node_settings = options.local_resources.get(group) or PythonProcess()
        for position, node in enumerate(nodes):
            # Ray forwards node output to the launcher's screen.
            node_spec = spec.make_cluster_spec(node, controller, node_settings,
                                               options.bind_address,
                                               failure_shown_by_launcher=True)
            actor = actor_options({**ray_options(given.get(group)), **runtime_env,
                                   **placement.options(group, position)})
            worker = RayNodeWorker(
                node.name, spec.encode(node_spec),
                lambda o=actor, n=node.name: remote.options(**o).remote(n),
                on_exit=controller.worker_ended)
            controller.add_worker(worker)
            workers.append(worker)
    for worker in workers:
        worker.start()
