"""test_mp: local_mp inside a test. The test's cleanup stops the program and waits for it, so
a node failure fails the test and no node process outlives it."""

from __future__ import annotations

from launchpad.launch.local import mp as local_mp
from launchpad.launch.local import test_mt
from launchpad.launch.runtime.controller import Controller
from launchpad.launch.runtime.launcher import LaunchOptions, Plan
from launchpad.program import Program


class InTestProcessesLauncher(local_mp.ProcessesLauncher):
    """test_mp: local_mp inside a test (see the module doc)."""

    name = "test_mp"
    recorded = False
    live_status = False

    def prepare(self, program: Program, options: LaunchOptions) -> Plan:
        test_mt.check_test_case(options.test_case, "test_mp", "local_mp")
        return super().prepare(program, options)

    def start(self, plan: Plan, controller: Controller) -> None:
        test_mt.stop_at_cleanup(plan.options.test_case, controller)
        super().start(plan, controller)
