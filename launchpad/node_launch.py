"""Launchpad's description of a launch, at the names its code uses (`launchpad.context`
exports them): `LaunchType`, `is_local_launch(_or_test)`, a node's `LaunchContext` (its launch
type, its launch config, a program stopper) and `set_context`, by which a thread says which
launch context `get_context()` gives it. Plain values: this module imports nothing of ours.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from typing import Any


class LaunchType(str, enum.Enum):
    """Where a program's nodes run (`lp.launch(launch_type=...)`, `--lp_launch_type`)."""

    LOCAL_MULTI_THREADING = "local_mt"
    LOCAL_MULTI_PROCESSING = "local_mp"
    TEST_MULTI_THREADING = "test_mt"
    TEST_MULTI_PROCESSING = "test_mp"
    SLURM = "slurm"
    RAY = "ray"
    KUBERNETES = "kubernetes"
    # Launchpad's, for XManager: named so that code testing for them runs; launching with
    # them is refused with the launch type to use instead (launch/launch.py).
    LOCAL_DOCKER = "local_docker"
    VERTEX_AI = "vertex_ai"


_LOCAL = (LaunchType.LOCAL_MULTI_THREADING, LaunchType.LOCAL_MULTI_PROCESSING)
_TEST = (LaunchType.TEST_MULTI_THREADING, LaunchType.TEST_MULTI_PROCESSING)


def launch_type_of(value: LaunchType | str) -> LaunchType | str:
    """`value` as a LaunchType; an engine added outside Launchpad's launch types (its row
    of the table of engines) keeps its own name."""
    try:
        return LaunchType(value)
    except ValueError:
        return str(value)


def is_local_launch(launch_type: LaunchType | str) -> bool:
    """Whether `launch_type` (a LaunchType or its value) is local_mt or local_mp."""
    return LaunchType(launch_type) in _LOCAL


def is_local_launch_or_test(launch_type: LaunchType | str) -> bool:
    """Whether `launch_type` is local_mt, local_mp, test_mt or test_mp."""
    return LaunchType(launch_type) in _LOCAL + _TEST


class LaunchContext:
    """Launchpad's description of a node's launch (`launchpad.context.get_context()`): its
    launch type, its launch config and a callable that stops its program."""

    def __init__(self):
        self._initialized = False
        self._launch_type: LaunchType | None = None
        self._launch_config: Any = None
        self._program_stopper: Callable[[], None] | None = None

    def initialize(self, launch_type: LaunchType | str, launch_config: Any,
                   program_stopper: Callable[[], None] | None = None) -> None:
        self._launch_type = launch_type_of(launch_type)
        self._launch_config = launch_config
        self._program_stopper = program_stopper
        self._initialized = True

    @property
    def initialized(self) -> bool:
        """Whether a launch has set it (a node's, once launched)."""
        return self._initialized

    def _checked(self, value: Any) -> Any:
        if not self._initialized:
            raise RuntimeError("Launch context is not yet initialized: it is made when a "
                               "node of a launched program runs")
        return value

    @property
    def launch_type(self) -> LaunchType:
        return self._checked(self._launch_type)

    @property
    def launch_config(self) -> Any:
        return self._checked(self._launch_config)

    @property
    def program_stopper(self) -> Callable[[], None]:
        return self._checked(self._program_stopper)


class _GivenToThread(threading.local):
    """What `set_context` gave each thread (None: nothing)."""

    launch_context: LaunchContext | None = None


_set_by_thread = _GivenToThread()


def set_context(launch_context: LaunchContext) -> None:
    """Makes `get_context()` return `launch_context` in this thread (Launchpad's; custom
    launchers built on its internals call it)."""
    _set_by_thread.launch_context = launch_context


def given_to_this_thread() -> LaunchContext | None:
    """What `set_context` gave this thread, if anything."""
    return _set_by_thread.launch_context
