"""`lp.launch`'s options, checked in one place against one schema.

As a table of options checks a remote function's (each option's types, a check of its
value, its default), every keyword of `lp.launch` besides the program, the launch type and
the engines' settings (each engine's row of launchers.py) is an `Option` here: the types it
takes, what else its value must be, and the --lp_* flag that gives it when it is not passed
(launchpad/flags.py). `resolve`
checks what was given against the schema and against the launcher (the terminals it has,
the fields of lp.PythonProcess it honours, whether it detaches), and returns the
`LaunchOptions` every launcher reads. Nothing is started before it returns. Each option
is documented here, once: `document` makes `lp.launch`'s Args from it.
"""

from __future__ import annotations

import dataclasses
import inspect
import numbers
import sys
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

from absl import logging

from launchpad import flags as lp_flags
from launchpad.courier import TLS
from launchpad.launch import launchers
from launchpad.launch.runtime import resources as resources_lib
from launchpad.launch.runtime import terminals
from launchpad.launch.runtime.controller import DEFAULT_STARTUP_TIMEOUT_SECS
from launchpad.launch.runtime.launcher import Clocks, Detach, Launcher, LaunchOptions
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
      doc: what it does, for `lp.launch`'s docstring.
    """

    types: tuple[type, ...]
    expects: str
    check: Callable[[Any], bool] | None = None
    flag: str | None = None
    noun: str | None = None
    error: type[Exception] | None = None
    doc: str = ""

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
    "local_resources": Option(
        (Mapping,), "a dict: group label -> lp.PythonProcess",
        doc="per-group settings for process launchers: group label -> "
            "lp.PythonProcess(args=, env=, interpreter=); None or [] is the defaults; "
            "groups the program lacks are ignored (logged); thread launchers ignore them."),
    "terminal": Option(
        (str,), "one of " + ", ".join(terminals.TERMINALS),
        doc="where process launchers send node output: 'current_terminal' (default), "
            "'output_to_files' or 'tmux_session' (or $LAUNCHPAD_LAUNCH_LOCAL_TERMINAL); thread "
            "launchers share the launching process's own output."),
    "serialize_py_nodes": Option(
        (bool,), "True or False",
        doc="pickle and unpickle each node before it runs in a thread, to catch unpicklable "
            "nodes early (default: True for test_mt, False for local_mt)."),
    "termination_notice_secs": Option(
        _NUMBER, "a number of seconds (< 0: never end nodes)", flag="lp_termination_notice_secs",
        doc="seconds nodes get to finish after a stop (default 10, or "
            "--lp_termination_notice_secs; < 0: they are never ended)."),
    "resources": Option(
        (Mapping,), "a dict: group label -> lp.Resources",
        doc="per-group needs for cluster launch types: group label -> lp.Resources (default "
            "one CPU per node); local launch types check the labels only."),
    "tls": Option(
        (TLS, bool), "an lp.TLS, True (made for this launch) or None",
        doc="run every courier server and client of the program over TLS with mutual "
            "authentication: an lp.TLS, or True for certificates made for this launch (needs "
            "the `cryptography` package); the token stays required either way."),
    "liveness_timeout_secs": Option(
        _NUMBER, "a number > 0", check=_positive,
        doc="a node process whose heartbeats stop this long (its host lost, its process "
            "frozen) fails, or is restarted by its group's policy (default 10)."),
    "startup_timeout_secs": Option(
        _NUMBER, "a number > 0", check=_positive,
        doc="a node whose process (or actor, or pod) was made this long ago and has not yet "
            "reported that it started (its interpreter or an import hangs, the resources it "
            "needs never become free) fails, named, or is restarted by its group's policy "
            "(default 600; a cluster job's wait in its queue does not count). A launch type "
            "that times starts its own way refuses it, saying how."),
    "detach": Option(
        (bool,), "True or False",
        doc="put the controller inside the cluster (a cluster job's batch step, a detached "
            "actor) and return at once a controller whose `run_id` "
            "`lp.attach(run_id)` reconnects to later; the program outlives the launching "
            "process. Local launch types refuse it."),
    "status": Option(
        (bool,), "True or False", flag="lp_status",
        doc="local launch types: a live table of the nodes in the launching terminal (None: "
            "--lp_status); off when the output is not a terminal."),
    "dashboard_port": Option(
        (int,), "an int in 1..65535 (0 or None: no dashboard)", check=_port,
        flag="lp_dashboard_port", noun="a dashboard port", error=ValueError,
        doc="serve the program's web dashboard (its graph, nodes, failures, logs, RPC "
            "metrics) and Prometheus' /metrics on this port of 127.0.0.1, from the launching "
            "process, until the program stops; the URL, with the token every request needs, "
            "is printed and kept as `controller.dashboard_url` (the `dashboard` extra). None "
            "reads --lp_dashboard_port; 0: no dashboard."),
    "dry_run": Option(
        (bool,), "True or False", flag="lp_dry_run",
        doc="check everything, print what would be started (on a cluster each node's host "
            "slot and the job's request) and start nothing; lp.launch then returns a DryRun, "
            "whose waits return at once. None reads --lp_dry_run."),
    "resume": Option(
        (str,), "the id of an earlier run of this user", flag="lp_resume",
        doc="the run id of an earlier run of this program: every node of a group that keeps "
            "state (lp.StatePolicy) starts from its latest state of that run (None reads "
            "--lp_resume). A program whose groups differ from that run's is refused, naming "
            "them."),
    "resume_partial": Option(
        (bool,), "True or False",
        doc="resume even where the groups differ (the nodes that match start from their "
            "states)."),
}
# The arguments of lp.launch that are no option of a launch.
_ARGUMENTS = {
    "programs": "the program, or a list of programs, to launch.",
    "launch_type": "a LaunchType or its value; None reads --lp_launch_type (default "
                   "local_mt). Launchpad's local_docker and vertex_ai (XManager's) are "
                   "refused, naming the launch type that runs such a program here.",
    "xm_resources": "Launchpad's XManager resources (group -> lp.DockerConfig); accepted and "
                    "ignored, so code written for Launchpad runs unchanged.",
    "controller_xm_requirements": "Launchpad's XManager requirements of its controller job; "
                                  "accepted and ignored, as xm_resources are.",
    "test_case": "for test_* launch types, the unittest.TestCase (or pytest `request`) whose "
                 "cleanup stops the program; a node failure then fails the test. test_mt may "
                 "go without one, as in Launchpad: the program then runs until it is stopped, "
                 "or until the interpreter exits, which stops it.",
}
_XM_OPTIONS = ("xm_resources", "controller_xm_requirements")
_xm_noted = False


def document(function: Callable[..., Any]) -> str | None:
    """`function`'s docstring, cleaned (as Python 3.13 compiles it, whatever the version),
    with an Args section before its Raises: each of its parameters, as the schema documents
    it (None under `python -OO`, which drops it)."""
    if function.__doc__ is None:
        return None
    documented = {**_ARGUMENTS, **{name: option.doc for name, option in OPTIONS.items()}}
    lines = ["Args:"]
    for name, parameter in inspect.signature(function).parameters.items():
        texts = ([(keyword, row.doc) for keyword, (_, row) in launchers.settings().items()]
                 if parameter.kind is parameter.VAR_KEYWORD else [(name, documented[name])])
        for keyword, text in texts:
            lines += textwrap.wrap(f"{keyword}: {text}", 92, initial_indent="  ",
                                   subsequent_indent="    ")
    return inspect.cleandoc(function.__doc__).replace(
        "\nRaises:", "\n" + "\n".join(lines) + "\n\nRaises:")


def resolve(launcher: Launcher, programs: int,
            engine_settings: Mapping[str, Any] | None = None, **given: Any) -> LaunchOptions:
    """Checks what `lp.launch` was given for `programs` programs under `launcher`;
    `engine_settings` are its keywords for the engines (each engine's `Settings` row).

    Raises:
      TypeError, ValueError: an option is bad, or not for this launcher (named).
    """
    _ignore_xm_options(launcher, {name: given.pop(name, None) for name in _XM_OPTIONS})
    test_case = given.pop("test_case", None)
    unknown = sorted(set(given) - set(OPTIONS))
    if unknown:  # (an engine's settings come in engine_settings)
        raise TypeError(f"lp.launch got unknown options {', '.join(unknown)}")
    values = {name: option.value(name, given.get(name)) for name, option in OPTIONS.items()}
    settings = _settings(launcher, engine_settings or {})
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


def _settings(launcher: Launcher, given: Mapping[str, Any]) -> Any:
    """The settings `launcher` reads of `given` (each engine's keyword checked for its
    type), else those its --lp_* flags give; None for its defaults."""
    known = launchers.settings()
    for keyword, value in given.items():
        if keyword not in known:
            raise TypeError(f"lp.launch() got an unexpected keyword argument {keyword!r}; "
                            f"its engines' keywords are {', '.join(sorted(known))}")
        engine, row = known[keyword]
        settings_type = engine.load(row.type)
        if value is not None and not isinstance(value, settings_type):
            raise TypeError(f"{keyword}={value!r}: {keyword} must be an "
                            f"lp.{settings_type.__name__}")
    keyword = launchers.settings_keyword(launcher)
    chosen = given.get(keyword) if keyword else None
    return chosen if chosen is not None or not keyword else launcher.settings_from_flags()


def check_program(program: Program, options: LaunchOptions) -> None:
    """Refuses `resources` that name groups `program` does not have. `local_resources` for
    such groups are ignored, as Launchpad ignores them (code written for it passes one dict
    to programs of other shapes), with one line in the log naming them."""
    unknown = sorted(set(options.local_resources) - set(program.groups))
    if unknown:
        logging.warning("local_resources names groups %s that program %r does not have: "
                        "ignored (its groups: %s)", unknown, program.name,
                        sorted(program.groups))
    resources_lib.per_group(list(program.groups), program.name, options.resources)


def _clocks(launcher: Launcher, values: dict[str, Any]) -> Clocks:
    grace = values["termination_notice_secs"]
    startup = values["startup_timeout_secs"]
    if launcher.startup_timed_by and startup is not None:
        raise ValueError(f"startup_timeout_secs: under {launcher.name} "
                         f"{launcher.startup_timed_by}")
    if not launcher.startup_timed_by and startup is None:
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
