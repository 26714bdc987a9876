"""test_mp: local_mp inside a test. The test's cleanup stops the program and waits for it, so
a node failure fails the test and no node process outlives it."""

from __future__ import annotations

from typing import Any

from launchpad.launch.local import mp as local_mp
from launchpad.launch.local import test_mt
from launchpad.launch.runtime.controller import Controller
from launchpad.program import Program


def validate(*, test_case: Any, **options: Any) -> None:
    test_mt.check_test_case(test_case, "test_mp", "local_mp")
    local_mp.validate(**options)


def launch(program: Program, controller: Controller, *, test_case: Any, **options: Any) -> None:
    test_mt.stop_at_cleanup(test_case, controller)
    local_mp.launch(program, controller, **options)
