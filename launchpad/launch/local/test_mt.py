"""test_mt: local_mt inside a test. The test's cleanup stops the program and waits for it,
so a node failure fails the test and no node outlives it. Nodes are serialized by default,
as a process launcher would, so unpicklable nodes are caught in tests.

As in Launchpad, test_mt also runs without a test case (Acme's tests launch so): the program
then runs until it is stopped, or until the interpreter exits, which stops it."""

from __future__ import annotations

from typing import Any

from launchpad.launch.local import mt as local_mt
from launchpad.launch.runtime import at_exit
from launchpad.launch.runtime.controller import Controller
from launchpad.launch.runtime.launcher import LaunchOptions, Plan
from launchpad.program import Program


def _stop_and_wait(controller: Controller) -> None:
    """Stops the program and waits for it; a node's failure fails the test, unless a wait()
    of the test raised it already (the test saw it, as with Launchpad's)."""
    controller.stop()
    controller.wait(raise_error=False)
    if controller.failure is not None and not controller.failure_raised:
        raise controller.failure


def check_test_case(test_case: Any, launch_type: str, outside: str) -> None:
    if not (hasattr(test_case, "addCleanup") or hasattr(test_case, "addfinalizer")):
        raise ValueError(
            f"launch_type={launch_type!r} needs test_case=: a unittest.TestCase (self), or "
            f"pytest's `request` fixture; got {test_case!r}. Outside tests use "
            f"launch_type={outside!r}")


def stop_at_cleanup(test_case: Any, controller: Controller) -> None:
    """Stops the program and waits for it when the test ends (failing it if a node failed)."""
    if hasattr(test_case, "addCleanup"):
        test_case.addCleanup(_stop_and_wait, controller)
    else:
        test_case.addfinalizer(lambda: _stop_and_wait(controller))


class InTestThreadsLauncher(local_mt.ThreadsLauncher):
    """test_mt: local_mt inside a test (see the module doc)."""

    name = "test_mt"
    recorded = False
    live_status = False
    serialize_by_default = True

    def prepare(self, program: Program, options: LaunchOptions) -> Plan:
        if options.test_case is not None:
            check_test_case(options.test_case, "test_mt", "local_mt")
        return super().prepare(program, options)

    def start(self, plan: Plan, controller: Controller) -> None:
        test_case = plan.options.test_case
        if test_case is not None:
            stop_at_cleanup(test_case, controller)
        super().start(plan, controller)
        if test_case is None:
            at_exit.stop(controller)  # the interpreter's exit stops it, as in Launchpad
