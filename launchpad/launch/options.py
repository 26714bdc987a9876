"""`lp.launch`'s options, checked in one place against one schema.

As Ray checks `ray.remote`'s options against a table (`ray_option_utils`: each option's
types, a check of its value, its default), every keyword of `lp.launch` besides the program
and the launch type is an `Option` here: the types it takes, what else its value must be,
and the --lp_* flag that gives it when it is not passed (launchpad/flags.py). `resolve`
checks what was given against the schema and against the launcher (the terminals it has,
the fields of lp.PythonProcess it honours, whether it detaches), and returns the
`LaunchOptions` every launcher reads. Nothing is started before it returns.
"""

from __future__ import annotations

import dataclasses
import numbers
import sys
from collections.abc import Callable, Mapping
from typing import Any

from absl import logging

from launchpad import flags as lp_flags
from launchpad.courier import TLS
from launchpad.launch.kubernetes.settings import KubernetesSettings
from launchpad.launch.ray.settings import RaySettings
from launchpad.launch.runtime import resources as resources_lib
from launchpad.launch.runtime import terminals
from launchpad.launch.runtime.controller import DEFAULT_STARTUP_TIMEOUT_SECS
from launchpad.launch.runtime.launcher import Clocks, Detach, Launcher, LaunchOptions
from launchpad.launch.slurm.settings import SlurmSettings
from launchpad.nodes.python.local_multi_processing import PythonProcess
from launchpad.program import Program

# What a negative termination notice (Launchpad: "disable hard termination") stands for: a
# grace period no program waits out.
NEVER_END_SECS = 365 * 24 * 3600.0


@dataclasses.dataclass(frozen=True)
class Option:
    """One keyword of `lp.launch`.

    Args:
      types: the types its value may have (None, for "not given", always may).
      expects: what it must be, as an error says it ("an lp.TLS, ...").
      check: what is wrong with a value of the right type, or None.
      flag: the --lp_* flag (without --) that gives it when it is not passed.
      noun: what an error calls it (default: its keyword).
      error: the error a bad value raises (default: TypeError for a wrong type, ValueError
        for a wrong value).
    """

    types: tuple[type, ...]
    expects: str
    check: Callable[[Any], bool] | None = None
    flag: str | None = None
    noun: str | None = None
    error: type[Exception] | None = None

    def value(self, name: str, given: Any) -> Any:
        """The checked value of keyword `name`: `given`, else the flag's."""
        origin = f"{name}={given!r}"
        if given is None and self.flag:
            given = lp_flags.value(self.flag)
            origin = f"--{self.flag}={given}"
        if given is None:
            return None
        wrong_type = (not isinstance(given, self.types)
                      or (isinstance(given, bool) and bool not in self.types))
        if wrong_type or (self.check is not None and not self.check(given)):
            error = self.error or (TypeError if wrong_type else ValueError)
            raise error(f"{origin}: {self.noun or name} must be {self.expects}")
        return given


def _positive(value: float) -> bool:
    return value > 0


def _port(value: int) -> bool:
    return 0 <= value < 65536


_NUMBER = (numbers.Real,)
OPTIONS: dict[str, Option] = {
    "local_resources": Option((Mapping,), "a dict: group label -> lp.PythonProcess"),
    "terminal": Option((str,), "one of " + ", ".join(terminals.TERMINALS)),
    "serialize_py_nodes": Option((bool,), "True or False"),
    "termination_notice_secs": Option(_NUMBER, "a number of seconds (< 0: never end nodes)",
                                      flag="lp_termination_notice_secs"),
    "resources": Option((Mapping,), "a dict: group label -> lp.Resources"),
    "slurm": Option((SlurmSettings,), "an lp.SlurmSettings"),
    "ray": Option((RaySettings,), "an lp.RaySettings"),
    "kubernetes": Option((KubernetesSettings,), "an lp.KubernetesSettings"),
    "tls": Option((TLS, bool), "an lp.TLS, True (made for this launch) or None"),
    "liveness_timeout_secs": Option(_NUMBER, "a number > 0", check=_positive),
    "startup_timeout_secs": Option(_NUMBER, "a number > 0", check=_positive),
    "detach": Option((bool,), "True or False"),
    "status": Option((bool,), "True or False", flag="lp_status"),
    "dashboard_port": Option((int,), "an int in 1..65535 (0 or None: no dashboard)",
                             check=_port, flag="lp_dashboard_port",
                             noun="a dashboard port", error=ValueError),
    "dry_run": Option((bool,), "True or False", flag="lp_dry_run"),
    "resume": Option((str,), "the id of an earlier run of this user", flag="lp_resume"),
    "resume_partial": Option((bool,), "True or False"),
}
_SETTINGS = {"slurm", "ray", "kubernetes"}  # each launcher reads its own (settings_keyword)
_XM_OPTIONS = ("xm_resources", "controller_xm_requirements")
_xm_noted = False


def resolve(launcher: Launcher, programs: int, **given: Any) -> LaunchOptions:
    """Checks what `lp.launch` was given for `programs` programs under `launcher`.

    Raises:
      TypeError, ValueError: an option is bad, or not for this launcher (named).
    """
    _ignore_xm_options(launcher, {name: given.pop(name, None) for name in _XM_OPTIONS})
    test_case = given.pop("test_case", None)
    values = {name: option.value(name, given.get(name)) for name, option in OPTIONS.items()}
    settings = values[launcher.settings_keyword] if launcher.settings_keyword else None
    if launcher.settings_keyword and settings is None:
        settings = launcher.settings_from_flags()
    detach = bool(values["detach"]) or launcher.detach is Detach.ALWAYS
    if detach and launcher.detach is Detach.NEVER:
        raise ValueError(f"detach=True needs a cluster launch type, not {launcher.name!r}: "
                         "a local program lives in the process that launched it")
    _check_local_resources(launcher, values["local_resources"] or {})
    live = _live_status(launcher, bool(values["status"]))
    return LaunchOptions(
        clocks=_clocks(launcher, values), test_case=test_case,
        serialize_py_nodes=values["serialize_py_nodes"],
        local_resources=dict(values["local_resources"] or {}),
        terminal=_terminal(launcher, values["terminal"], live),
        resources=values["resources"], settings=settings,
        tls=None if values["dry_run"] else _tls(values["tls"]),  # (a dry run makes none)
        detach=detach, live_status=live,
        dashboard=_dashboard(values["dashboard_port"], given.get("dashboard_port"), programs,
                             detach),
        dry_run=bool(values["dry_run"]), bind_address=lp_flags.value("lp_bind_address"),
        resume=values["resume"], resume_partial=bool(values["resume_partial"]))


def check_program(program: Program, options: LaunchOptions) -> None:
    """Refuses options that name groups `program` does not have."""
    unknown = sorted(set(options.local_resources) - set(program.groups))
    if unknown:
        raise ValueError(f"local_resources names groups {unknown} that program "
                         f"{program.name!r} does not have; its groups: {sorted(program.groups)}")
    resources_lib.per_group(list(program.groups), program.name, options.resources)


def _clocks(launcher: Launcher, values: dict[str, Any]) -> Clocks:
    grace = values["termination_notice_secs"]
    startup = values["startup_timeout_secs"]
    if not launcher.times_startup and startup is not None:
        raise ValueError(f"startup_timeout_secs: under {launcher.name} a pod's start is timed "
                         "by lp.KubernetesSettings(startup_timeout_secs=...)")
    if launcher.times_startup and startup is None:
        startup = DEFAULT_STARTUP_TIMEOUT_SECS
    liveness = values["liveness_timeout_secs"]
    return Clocks(termination_notice_secs=NEVER_END_SECS if grace < 0 else grace,
                  liveness_timeout_secs=10.0 if liveness is None else liveness,
                  startup_timeout_secs=startup)


def _live_status(launcher: Launcher, asked: bool) -> bool:
    """Whether to show the live table (--lp_status): asked for, one the launcher shows, and
    the output a terminal (redrawn in a log or a pipe, it is only noise)."""
    if not (asked and launcher.live_status):
        return False
    if not sys.stdout.isatty():
        logging.info("--lp_status: the output is not a terminal; no live table")
        return False
    return True


def _terminal(launcher: Launcher, terminal: str | None, live: bool) -> str | None:
    """The terminal a process launcher sends node output to (None for thread launchers,
    whose nodes share the launching process's output). Under the live table, node output
    goes to files unless a terminal is given: the table owns the terminal."""
    if not launcher.terminals:
        return None
    if live and terminal is None:
        terminal = terminals.OUTPUT_TO_FILES
    chosen = terminals.choose(terminal)
    if chosen not in launcher.terminals:
        raise ValueError(f"terminal={chosen!r} is not available under {launcher.name}: "
                         f"{launcher.terminals_note}")
    return chosen


def _check_local_resources(launcher: Launcher, given: Mapping[str, Any]) -> None:
    """Each group's lp.PythonProcess, against the fields the launcher honours (thread
    launchers check only the labels)."""
    if launcher.process_fields is None:
        return
    for group, settings in given.items():
        # An empty value (None, [], {}) stands for the defaults, as in Launchpad.
        if not settings:
            continue
        unusable = isinstance(settings, PythonProcess) and [
            field.name for field in dataclasses.fields(settings)
            if getattr(settings, field.name) and field.name not in launcher.process_fields]
        if not isinstance(settings, PythonProcess) or unusable:
            under, only = ((f" under {launcher.name}", f" with {launcher.process_note}")
                           if launcher.process_note else ("", ""))
            raise TypeError(f"local_resources[{group!r}]{under} must be an lp.PythonProcess "
                            f"(or empty, for the defaults){only}, got {settings!r}")


def _tls(tls: TLS | bool | None) -> TLS | None:
    if tls is True:
        return TLS.generate()
    return tls or None


def _dashboard(port: int | None, given: int | None, programs: int,
               detach: bool) -> tuple[int, str] | None:
    """The dashboard's port and what asked for it (for errors), or None for no dashboard."""
    if not port:
        return None
    origin = f"dashboard_port={port}" if given is not None else f"--lp_dashboard_port={port}"
    if programs > 1:
        raise ValueError(f"{origin}: a dashboard shows one program; launch {programs} "
                         "programs with one each, separately")
    if detach:
        raise ValueError(f"{origin}: the dashboard is served by the controller's process, "
                         "which a detached launch puts in the cluster")
    return port, origin


def _ignore_xm_options(launcher: Launcher, given: dict[str, Any]) -> None:
    """Launchpad's XManager options (xm_resources, controller_xm_requirements) are ignored,
    which is said once."""
    global _xm_noted
    named = [name for name, value in given.items() if value is not None]
    if not named or _xm_noted:
        return
    _xm_noted = True
    logging.info("lp.launch: %s are for XManager launches; launch_type %r ignores them "
                 "(cluster launch types take resources={group: lp.Resources(...)})",
                 " and ".join(named), launcher.name)
