"""Launchpad's `launch()` of local_mt: `lp.launch(program, launch_type='local_mt', ...)`."""

from __future__ import annotations

from launchpad.context import LaunchType
from launchpad.launch.launch import launch as _launch
from launchpad.launch.runtime.controller import Controller
from launchpad.program import Program


def launch(program: Program, *, serialize_py_nodes: bool | None = None) -> Controller:
    """Launches `program` as threads of this process (see launch/local/mt.py)."""
    return _launch(program, LaunchType.LOCAL_MULTI_THREADING,
                   serialize_py_nodes=serialize_py_nodes)
