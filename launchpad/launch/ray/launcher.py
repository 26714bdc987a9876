"""ray: each node a Ray actor (ray/actors.py says the steps).

    lp.launch(program, launch_type="ray",
              resources={"learner": lp.Resources(cpus=4, gpus=1)},
              ray=lp.RaySettings(address="head:6379", placement={"actor": "SPREAD"}))
"""

from __future__ import annotations

import dataclasses

from launchpad import address
from launchpad import flags as lp_flags
from launchpad.launch.ray import connection as ray_connection
from launchpad.launch.ray.actors import start_actors
from launchpad.launch.ray.settings import RaySettings
from launchpad.launch.runtime import terminals
from launchpad.launch.runtime.controller import Controller
from launchpad.launch.runtime.errors import LaunchError
from launchpad.launch.runtime.launcher import (
    Detach,
    DetachedRuns,
    Launcher,
    LaunchOptions,
    Plan,
)
from launchpad.program import Program


class RayLauncher(Launcher):
    """ray: each node a Ray actor (see the module doc)."""

    name = "ray"
    where_nodes_run = "a Ray actor"
    detach = Detach.OPTIONAL
    recorded = True
    terminals = frozenset({terminals.CURRENT_TERMINAL})
    terminals_note = ("node output comes back through Ray's log forwarding (and stays in "
                      "Ray's logs)")
    process_fields = frozenset({"args", "env"})
    process_note = ("args or env only (the interpreter is the Ray cluster's; set it up with "
                    "RaySettings(runtime_env=...))")

    def settings_from_flags(self) -> RaySettings | None:
        given = lp_flags.value("lp_ray_address")
        return RaySettings(address=given) if given else None

    def prepare(self, program: Program, options: LaunchOptions) -> Plan:
        """Refuses a launch without Ray; one that starts here connects to the cluster, and
        its nodes reach the controller on this host's route to the cluster's GCS."""
        try:
            import ray as ray_module  # noqa: F401 - only whether it imports
        except ImportError as e:
            raise LaunchError("launch_type='ray' needs Ray: pip install "
                              f"'launchpad-next[ray]' ({e})") from e
        plan = Plan(program, options, self.describe(program))
        if not options.starts_here:
            return plan
        gcs = ray_connection.connect(options.settings or RaySettings())
        return dataclasses.replace(plan, controller_host=address.routed_host(
            gcs.rsplit(":", 1)[0]))

    def start(self, plan: Plan, controller: Controller) -> None:
        start_actors(plan.program, controller, plan.options)

    def detached_runs(self) -> DetachedRuns:
        from launchpad.launch.ray import detached  # (what a detached launch needs)
        return detached.DetachedRayRuns()
