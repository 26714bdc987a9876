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

from launchpad.launch.ray import connection as ray_connection
from launchpad.launch.ray.node import NodeActor, RayNodeWorker, actor_options
from launchpad.launch.ray.placement import Placements, bundle_of, ray_options
from launchpad.launch.ray.settings import RaySettings
from launchpad.launch.runtime import spec
from launchpad.launch.runtime.controller import Controller
from launchpad.launch.runtime.errors import LaunchError
from launchpad.launch.runtime.launcher import LaunchOptions
from launchpad.launch.runtime.resources import Resources
from launchpad.nodes.python.local_multi_processing import PythonProcess
from launchpad.program import Program


def _check_needs(program: Program, given: dict[str, Resources]) -> None:
    """Each group's needs must fit one alive Ray node, else Ray would leave it pending."""
    import ray
    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    for group, needs in given.items():
        for key, value in needs.extra.items():
            if not isinstance(value, numbers.Real) or isinstance(value, bool) or value < 0:
                raise ValueError(f"resources[{group!r}].extra[{key!r}] under ray must be a "
                                 f"custom resource amount (a number >= 0), got {value!r}")
        wanted = bundle_of(ray_options(needs))
        if not any(all(node.get(k, 0) >= v for k, v in wanted.items()) for node in nodes):
            have = "; ".join(", ".join(f"{k}={v:g}" for k, v in sorted(node.items())
                                       if not k.startswith("node:")) for node in nodes)
            raise LaunchError(f"Group {group!r} of program {program.name!r} asks for "
                              f"{wanted} per node, and no node of the Ray cluster has that "
                              f"much (its nodes: {have or 'none'})")


def start_actors(program: Program, controller: Controller, options: LaunchOptions) -> None:
    """Starts each node of `program` as an actor on the Ray cluster (see the module doc); a
    group that grows while the program runs takes room first (ray/placement.py)."""
    import ray as ray_module
    settings = options.settings or RaySettings()
    given = dict(options.resources or {})
    ray_connection.connect(settings)
    ray_connection.hold()
    workers: dict[str, RayNodeWorker] = {}
    placements: list[Placements] = []

    def finish() -> None:
        for worker in list(workers.values()):
            worker.close()  # before the connection goes: Ray ends a process used after it
        for made in placements:
            made.remove()
        ray_connection.release()

    controller.on_finish(finish)  # from here on, a failure's controller.kill() ends it all
    _check_needs(program, given)
    placement = Placements(program, settings, given)
    placements.append(placement)
    placement.make()
    remote = ray_module.remote(NodeActor)
    runtime_env = {"runtime_env": dict(settings.runtime_env)} if settings.runtime_env else {}

    def start(nodes: list) -> None:
        started = []
        for node in nodes:
            node_settings = options.local_resources.get(node.label) or PythonProcess()
            # Ray forwards node output to the launcher's screen.
            node_spec = spec.make_cluster_spec(node, controller, node_settings,
                                               options.bind_address,
                                               failure_shown_by_launcher=True)
            actor = actor_options({**ray_options(given.get(node.label)), **runtime_env,
                                   **placement.options(node.name)})
            worker = RayNodeWorker(
                node.name, spec.encode(node_spec),
                lambda o=actor, n=node.name: remote.options(**o).remote(n),
                on_exit=controller.worker_ended)
            controller.add_worker(worker)
            workers[node.name] = worker
            started.append(worker)
        for worker in started:
            worker.start()

    def grow(nodes: list) -> None:
        names = [node.name for node in nodes]
        placement.take(nodes[0].label, names)
        try:
            start(nodes)
        except BaseException:
            placement.free(names)
            raise

    def removed(names: list[str]) -> None:
        for name in names:
            worker = workers.pop(name, None)
            if worker is not None:
                worker.close()
        placement.free(names)

    start(program.get_all_nodes())
    controller.scaling.start_nodes = grow
    controller.scaling.nodes_removed = removed
