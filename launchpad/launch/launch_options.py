"""What `lp.launch` is told besides the program: the launch types, the `--lp_*` flags and
the clocks it gives the controller.

The flags are defined when this module is imported (so that `app.run` accepts them on the
command line) and read when a launch needs them, from the app's parsed flags or else straight
from sys.argv: a launch works whether or not the script parsed its flags.
"""

from __future__ import annotations

import enum
import sys
from typing import Any

from absl import flags

from launchpad.launch.controller import DEFAULT_STARTUP_TIMEOUT_SECS
from launchpad.launch.ray_settings import RaySettings
from launchpad.launch.slurm_settings import SlurmSettings

DEFAULT_LAUNCH_TYPE = "local_mt"
DEFAULT_TERMINATION_NOTICE_SECS = 10.0


class LaunchType(str, enum.Enum):
    """Where a program's nodes run."""

    LOCAL_MULTI_THREADING = "local_mt"
    LOCAL_MULTI_PROCESSING = "local_mp"
    TEST_MULTI_THREADING = "test_mt"
    TEST_MULTI_PROCESSING = "test_mp"
    SLURM = "slurm"
    RAY = "ray"
    KUBERNETES = "kubernetes"


_SLURM_FLAGS = {"partition": "partition", "account": "account", "qos": "QoS",
                "time_limit": "time limit (minutes, or D-HH:MM:SS)"}


def slurm_settings(slurm: SlurmSettings | None) -> SlurmSettings | None:
    """The settings given, else those of the --lp_slurm_* flags, else None (the defaults)."""
    if slurm is not None:
        return slurm
    given = {name: flag_value(f"lp_slurm_{name}") for name in _SLURM_FLAGS}
    given = {name: value for name, value in given.items() if value is not None}
    return SlurmSettings(**given) if given else None


def ray_settings(ray: RaySettings | None) -> RaySettings | None:
    """The settings given, else those of --lp_ray_address, else None (the defaults)."""
    if ray is not None:
        return ray
    given = flag_value("lp_ray_address")
    return RaySettings(address=given) if given else None


def _define_flags(flag_values: flags.FlagValues) -> None:
    flags.DEFINE_string(
        "lp_launch_type", None,
        f"How to launch a Launchpad program: {', '.join(t.value for t in LaunchType)}; "
        f"used when lp.launch() is given no launch_type (default {DEFAULT_LAUNCH_TYPE}).",
        flag_values=flag_values)
    flags.DEFINE_float(
        "lp_termination_notice_secs", None,
        "Seconds nodes get to finish after a stop before they are ended "
        f"(default {DEFAULT_TERMINATION_NOTICE_SECS:g}).", flag_values=flag_values)
    flags.DEFINE_string(
        "lp_bind_address", None,
        "The interface nodes bind their servers to (default: loopback for local launch "
        "types; for cluster ones, the interface through which a host reaches the "
        "controller; 0.0.0.0 binds every interface).", flag_values=flag_values)
    for name, what in _SLURM_FLAGS.items():
        flags.DEFINE_string(f"lp_slurm_{name}", None,
                            f"launch_type=slurm: the job's {what}, when lp.launch() is given "
                            "no slurm=lp.SlurmSettings(...)", flag_values=flag_values)
    flags.DEFINE_bool("lp_status", False,
                      "Local launch types: show a live table of the nodes (their state, "
                      "restarts, CPU, memory, call rates) while the program runs, when the "
                      "output is a terminal (needs the `status` extra: rich); under local_mp "
                      "node output then goes to files.", flag_values=flag_values)
    flags.DEFINE_string("lp_ray_address", None,
                        "launch_type=ray: the Ray cluster to join (its head's host:port, or "
                        "auto), when lp.launch() is given no ray=lp.RaySettings(...); default "
                        "$RAY_ADDRESS, else a Ray started for the launch",
                        flag_values=flag_values)
    flags.DEFINE_integer("lp_dashboard_port", None,
                         "Serve the program's web dashboard and /metrics on this port of "
                         "127.0.0.1 (its URL, with a token, is printed at launch), when "
                         "lp.launch() is given no dashboard_port; 0 or unset: none",
                         flag_values=flag_values)


# Defining is not parsing: the flags exist so that `app.run` accepts them on the command line.
if "lp_launch_type" not in flags.FLAGS:
    _define_flags(flags.FLAGS)


def flag_value(name: str) -> Any:
    """Reads a launch flag now: from the app's parsed flags, else straight from sys.argv."""
    if flags.FLAGS.is_parsed():
        return flags.FLAGS[name].value
    own = flags.FlagValues()
    _define_flags(own)
    own(sys.argv[:1] + [a for a in sys.argv[1:] if a.startswith("--lp_")], known_only=True)
    return own[name].value


def clocks(launch_type: LaunchType, termination_notice_secs: float | None,
           liveness_timeout_secs: float, startup_timeout_secs: float | None) -> dict:
    """The controller's clocks (its keyword arguments); a pod's start is Kubernetes' own."""
    if termination_notice_secs is None:
        termination_notice_secs = (flag_value("lp_termination_notice_secs")
                                   or DEFAULT_TERMINATION_NOTICE_SECS)
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
