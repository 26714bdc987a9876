"""test_mt: local_mt inside a test. The test's cleanup stops the program and waits for it,
so a node failure fails the test and no node outlives it. Nodes are serialized by default,
as a process launcher would, so unpicklable nodes are caught in tests."""

from __future__ import annotations

from typing import Any

from launchpad.launch import local_mt
from launchpad.launch.controller import Controller
from launchpad.program import Program


def _stop_and_wait(controller: Controller) -> None:
    controller.stop()
    controller.wait()  # raises NodeFailedError into the test if a node failed


def validate(*, test_case: Any, **unused: Any) -> None:
    if not (hasattr(test_case, "addCleanup") or hasattr(test_case, "addfinalizer")):
        raise ValueError(
            "launch_type='test_mt' needs test_case=: a unittest.TestCase (self), or pytest's "
            f"`request` fixture; got {test_case!r}. Outside tests use launch_type='local_mt'")


def launch(program: Program, controller: Controller, *, test_case: Any,
           serialize_py_nodes: bool | None, **unused: Any) -> None:
    if hasattr(test_case, "addCleanup"):
        test_case.addCleanup(_stop_and_wait, controller)
    else:
        test_case.addfinalizer(lambda: _stop_and_wait(controller))
    local_mt.launch(program, controller, serialize_py_nodes=serialize_py_nodes,
                    default_serialize=True)
