"""Launchpad's `launch()` of test_mp: `lp.launch(program, launch_type='test_mp', ...)`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from launchpad.context import LaunchType
from launchpad.launch import worker_manager, worker_manager_v2  # noqa: F401 - Launchpad's
from launchpad.launch.launch import launch as _launch
from launchpad.launch.runtime.controller import Controller
from launchpad.program import Program


def launch(program: Program, test_case: Any,
           local_resources: Mapping[str, Any] | None = None) -> Controller:
    """Launches `program` as processes of this host, stopped when `test_case` ends (see
    launch/local/test_mp.py)."""
    return _launch(program, LaunchType.TEST_MULTI_PROCESSING, test_case=test_case,
                   local_resources=dict(local_resources or {}))
