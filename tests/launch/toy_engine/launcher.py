"""The toy engine's launcher: every node a thread, and a record of each launch."""

from __future__ import annotations

from launchpad.launch.local.mt import start_threads
from launchpad.launch.runtime.controller import Controller
from launchpad.launch.runtime.launcher import Launcher, LaunchOptions, Plan
from launchpad.program import Program
from tests.launch.toy_engine.settings import ToySettings

# (launch type, greeting, plan's description) of each launch started, in order.
STARTED: list[tuple[str, str, str]] = []


class ToyLauncher(Launcher):
    name = "toy"
    where_nodes_run = "a toy thread"

    def prepare(self, program: Program, options: LaunchOptions) -> Plan:
        if len(program.get_all_nodes()) > 3:
            raise ValueError(f"the toy engine runs at most 3 nodes, and program "
                             f"{program.name!r} has {len(program.get_all_nodes())}")
        return super().prepare(program, options)

    def start(self, plan: Plan, controller: Controller) -> None:
        settings = plan.options.settings or ToySettings()
        STARTED.append((self.name, settings.greeting, plan.description))
        start_threads(plan.program, controller, serialize=False)
