"""Launchpad's `launch()` of test_mt: `lp.launch(program, launch_type='test_mt', ...)`."""

from __future__ import annotations

from typing import Any

from launchpad.context import LaunchType
from launchpad.launch import worker_manager, worker_manager_v2  # noqa: F401 - Launchpad's
from launchpad.launch.launch import launch as _launch
from launchpad.launch.runtime.controller import Controller
from launchpad.program import Program


def launch(program: Program, test_case: Any = None, *,
           serialize_py_nodes: bool | None = None) -> Controller:
    """Launches `program` as threads of this test process (see launch/local/test_mt.py)."""
    return _launch(program, LaunchType.TEST_MULTI_THREADING, test_case=test_case,
                   serialize_py_nodes=serialize_py_nodes)
