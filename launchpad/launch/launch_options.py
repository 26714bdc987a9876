"""What `lp.launch` is told besides the program: the launch types, the settings given by
`--lp_*` flags (launchpad/flags.py) and the clocks it gives the controller."""

from __future__ import annotations

from launchpad import flags as lp_flags
from launchpad.context import LaunchType
from launchpad.launch.ray.settings import RaySettings
from launchpad.launch.runtime.controller import DEFAULT_STARTUP_TIMEOUT_SECS
from launchpad.launch.slurm.settings import SlurmSettings

# What a negative termination notice (Launchpad: "disable hard termination") stands for: a
# grace period no program waits out.
NEVER_END_SECS = 365 * 24 * 3600.0


def slurm_settings(slurm: SlurmSettings | None) -> SlurmSettings | None:
    """The settings given, else those of the --lp_slurm_* flags, else None (the defaults)."""
    if slurm is not None:
        return slurm
    given = {name: lp_flags.value(f"lp_slurm_{name}") for name in lp_flags.SLURM_FLAGS}
    given = {name: value for name, value in given.items() if value is not None}
    return SlurmSettings(**given) if given else None


def ray_settings(ray: RaySettings | None) -> RaySettings | None:
    """The settings given, else those of --lp_ray_address, else None (the defaults)."""
    if ray is not None:
        return ray
    given = lp_flags.value("lp_ray_address")
    return RaySettings(address=given) if given else None


def clocks(launch_type: LaunchType, termination_notice_secs: float | None,
           liveness_timeout_secs: float, startup_timeout_secs: float | None) -> dict:
    """The controller's clocks (its keyword arguments); a pod's start is Kubernetes' own."""
    if termination_notice_secs is None:
        termination_notice_secs = lp_flags.value("lp_termination_notice_secs")
    if termination_notice_secs < 0:
        termination_notice_secs = NEVER_END_SECS
    given = {"termination_notice_secs": termination_notice_secs,
             "liveness_timeout_secs": liveness_timeout_secs}
    if launch_type is LaunchType.KUBERNETES:
        if startup_timeout_secs is not None:
            raise ValueError("startup_timeout_secs: under kubernetes a pod's start is timed "
                             "by lp.KubernetesSettings(startup_timeout_secs=...)")
        return given
    if startup_timeout_secs is None:
        startup_timeout_secs = DEFAULT_STARTUP_TIMEOUT_SECS
    if isinstance(startup_timeout_secs, bool) or not startup_timeout_secs > 0:
        raise ValueError(f"startup_timeout_secs must be a number > 0, got "
                         f"{startup_timeout_secs!r}")
    return {**given, "startup_timeout_secs": startup_timeout_secs}
