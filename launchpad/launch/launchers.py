"""The launchers, registered once: each launch type and the `Launcher` that runs it.

A launcher lives in its engine's folder (runtime/launcher.py says what one is). Its module
is imported when a launch uses it, so `import launchpad`, and every node's process, load
none they do not use. Adding an engine is its folder and one row here.
"""

from __future__ import annotations

import functools
import importlib

from launchpad import flags as lp_flags
from launchpad.context import LaunchType
from launchpad.launch.runtime.launcher import Launcher

_REGISTERED = {
    LaunchType.LOCAL_MULTI_THREADING: "local.mt:ThreadsLauncher",
    LaunchType.TEST_MULTI_THREADING: "local.test_mt:InTestThreadsLauncher",
    LaunchType.LOCAL_MULTI_PROCESSING: "local.mp:ProcessesLauncher",
    LaunchType.TEST_MULTI_PROCESSING: "local.test_mp:InTestProcessesLauncher",
    LaunchType.SLURM: "slurm.launcher:SlurmLauncher",
    LaunchType.RAY: "ray.launcher:RayLauncher",
    LaunchType.KUBERNETES: "kubernetes.launcher:KubernetesLauncher",
}

# Launchpad's XManager launch types, which need Google's XManager and its cloud: what runs
# their programs here instead.
_XMANAGER = {
    LaunchType.LOCAL_DOCKER: "Launchpad's local_docker ran each node in a Docker container "
                             "through XManager; here launch_type='local_mp' runs them as local "
                             "processes",
    LaunchType.VERTEX_AI: "Launchpad's vertex_ai ran the program on Google Cloud through "
                          "XManager; here launch_type='kubernetes' runs it on a cluster "
                          "(GKE included), 'slurm' or 'ray' on those engines",
}


def get(launch_type: LaunchType | str | None) -> Launcher:
    """The launcher of `launch_type` (a LaunchType or its value; None: --lp_launch_type).

    Raises:
      ValueError: no such launch type, or one that cannot run here (XManager's).
    """
    if not launch_type:
        launch_type = lp_flags.value("lp_launch_type") or lp_flags.DEFAULT_LAUNCH_TYPE
    try:
        launch_type = LaunchType(launch_type)
    except ValueError:
        raise ValueError(f"Unknown launch_type {launch_type!r}; launch types: "
                         f"{', '.join(t.value for t in _REGISTERED)}") from None
    if launch_type in _XMANAGER:
        raise ValueError(f"launch_type {launch_type.value!r} cannot run here: "
                         f"{_XMANAGER[launch_type]}")
    return _launcher(launch_type)


def every() -> list[Launcher]:
    """Every registered launcher (their modules imported)."""
    return [_launcher(launch_type) for launch_type in _REGISTERED]


@functools.cache
def _launcher(launch_type: LaunchType) -> Launcher:
    module, _, name = _REGISTERED[launch_type].partition(":")
    return getattr(importlib.import_module(f"launchpad.launch.{module}"), name)()
