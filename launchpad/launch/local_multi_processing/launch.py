"""Launchpad's `launch()` of local_mp: `lp.launch(program, launch_type='local_mp', ...)`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from launchpad.context import LaunchType
from launchpad.launch.launch import launch as _launch
from launchpad.launch.runtime.controller import Controller
from launchpad.program import Program


def launch(program: Program, local_resources: Mapping[str, Any] | None = None,
           terminal: str = "gnome-terminal") -> Controller:
    """Launches `program` as processes of this host (see launch/local/mp.py); Launchpad's
    default terminal, a window per node, stands for the current terminal here
    (terminals.py)."""
    return _launch(program, LaunchType.LOCAL_MULTI_PROCESSING,
                   local_resources=dict(local_resources or {}), terminal=terminal)
