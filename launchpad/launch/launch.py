"""`lp.launch`: turns a program into running nodes under a controller.

What every launch shares is here: the program checked, its options checked
(options.py), its launcher found (launchers.py), and for a launch whose controller runs
here the controller built whole and linked to the program, so handles can be dereferenced
in the launching process. What differs between launch types is their launcher's
(runtime/launcher.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Sequence
from typing import Any

from absl import logging

from launchpad import context
from launchpad import flags as lp_flags
from launchpad.context import LaunchType
from launchpad.courier import TLS
from launchpad.launch import launchers, run_registry
from launchpad.launch import options as launch_options
from launchpad.launch.runtime import at_exit, interrupts, run_states, traceback_text
from launchpad.launch.runtime.controller import Controller
from launchpad.launch.runtime.controllers import Controllers
from launchpad.launch.runtime.dry_run import DryRun
from launchpad.launch.runtime.errors import LaunchError, NodeSerializationError
from launchpad.launch.runtime.launcher import Launcher, LaunchOptions, Plan
from launchpad.launch.runtime.resources import Resources
from launchpad.launch.runtime.terminals import NodeOutput
from launchpad.program import Program


def launch(programs: Program | Sequence[Program],
           launch_type: LaunchType | str | None = None,
           xm_resources: dict | Sequence[dict] | None = None,
           local_resources: dict | None = None,
           test_case: Any = None,
           terminal: str | None = None,
           *,
           serialize_py_nodes: bool | None = None,
           controller_xm_requirements: dict | None = None,
           termination_notice_secs: float | None = None,
           resources: dict[str, Resources] | None = None,
           tls: TLS | bool | None = None,
           liveness_timeout_secs: float = 10.0,
           startup_timeout_secs: float | None = None,
           detach: bool = False,
           status: bool | None = None,
           dashboard_port: int | None = None,
           dry_run: bool | None = None,
           resume: str | None = None,
           resume_partial: bool = False,
           **engine_settings: Any) -> Controller | Controllers:
    """Launches a program (or several) and returns its controller (or a list of them, which
    also waits for and stops them all: Controllers).

    When the launching script returns while a program of this host still runs, the
    interpreter's exit waits for the program to stop, as in Launchpad (see at_exit.py).
    Each argument is documented once, with the check it gets, in options.py (the Args below
    are made from it).

    Raises:
      ValueError, TypeError: bad programs or options, named in the message.
    """
    single = isinstance(programs, Program)
    checked = [_check_program(p) for p in ([programs] if single else list(programs))]
    launcher = launchers.get(launch_type)
    options = launch_options.resolve(
        launcher, len(checked), xm_resources=xm_resources,
        controller_xm_requirements=controller_xm_requirements,
        local_resources=local_resources, test_case=test_case, terminal=terminal,
        serialize_py_nodes=serialize_py_nodes, termination_notice_secs=termination_notice_secs,
        resources=resources, engine_settings=engine_settings, tls=tls,
        liveness_timeout_secs=liveness_timeout_secs, startup_timeout_secs=startup_timeout_secs,
        detach=detach, status=status, dashboard_port=dashboard_port, dry_run=dry_run,
        resume=resume, resume_partial=resume_partial)
    if lp_flags.value("lp_verbose_errors"):  # (nodes' processes inherit it)
        os.environ[traceback_text.VERBOSE_VARIABLE] = "1"
    try:
        started = _launch_all(checked, launcher, options)
    except NodeSerializationError as error:
        if traceback_text.verbose():
            raise
        # The user's mistake, named in its message: launchpad's frames between this call
        # and where it was found would only bury it.
        raise error.with_traceback(None) from None
    return started[0] if single else Controllers(started)


def _launch_all(programs: list[Program], launcher: Launcher, options: LaunchOptions) -> list:
    """Prepares every program, then dry-runs, detaches or starts each: what it started."""
    plans = _prepare(programs, launcher, options)
    if options.dry_run:
        return [DryRun(plan.program, launcher.name, plan.description).say() for plan in plans]
    if options.detach:  # the controller runs in the cluster; so does the program
        return [launcher.detached_runs().launch(plan.program, options) for plan in plans]
    started: list = []
    try:
        for plan in plans:
            started.append(_start(plan, launcher))
    except BaseException:
        for plan in plans[len(started) + 1:]:  # (the failed one undid its own)
            _undo(None, plan.output, None)
        raise
    return started


def _check_program(program: Any) -> Program:
    if not isinstance(program, Program):
        raise TypeError(f"lp.launch expects a Program (or a list of them), got {program!r}")
    if not program.get_all_nodes():
        raise ValueError(f"Program {program.name!r} has no nodes to launch")
    running = context.launch_of(program)
    if running is not None and not running.stop_event.is_set():
        raise ValueError(f"Program {program.name!r} is already running; stop it (and wait) "
                         "before launching it again")
    return program


def _prepare(programs: list[Program], launcher: Launcher,
             options: LaunchOptions) -> list[Plan]:
    """The launcher's plan of each program, every one refused before any starts; then,
    unless it is a dry run, their nodes' launch contexts set."""
    plans: list[Plan] = []
    try:
        for program in programs:
            launch_options.check_program(program, options)
            plans.append(launcher.prepare(program, options))
    except BaseException:
        for plan in plans:
            _undo(None, plan.output, None)
        raise
    if not options.dry_run:
        for program in programs:
            _initialize_nodes(program, launcher, options)
    return plans


def _initialize_nodes(program: Program, launcher: Launcher, options: LaunchOptions) -> None:
    """What Launchpad's launchers did to every node first, for code that relies on it: its
    launch context set (the launch type; its group's `local_resources` entry under a process
    launch type), its input handles told of it (`Handle.connect`), and its addresses bound
    anew - one bound before (Mava's tests bind a node's, then launch it) resolves through
    the program's controller."""
    processes = launcher.process_fields is not None
    for label, nodes in program.groups.items():
        config = options.local_resources.get(label) if processes else None
        for node in nodes:
            node._initialize_context(launcher.name, config)
            for handle in node.input_handles:
                handle.connect(node, label)
            for address in node.addresses:
                address.unbind()


def _start(plan: Plan, launcher: Launcher) -> Controller:
    """Starts `plan` with its controller in this process: what the controller is given is
    made first (its run's folder, its dashboard's port); whatever had started (and the
    plan's output) when the launch fails ends, and the error is the caller's."""
    program, options, output = plan.program, plan.options, plan.output
    # The run's folder: its record, and its nodes' states (kept, for a later resume=).
    stateful = bool(program.state_policies) or options.resume is not None
    folder = dashboard = None
    try:
        if launcher.recorded or stateful:
            folder = run_registry.new_run(program.name)
        states = (run_states.prepare(program, os.path.basename(folder),
                                      run_states.state_folder(folder), options.resume,
                                      options.resume_partial) if stateful else None)
        if options.dashboard is not None:  # a port taken fails the launch
            from launchpad.launch.dashboard import server as dashboard_server
            dashboard = dashboard_server.Dashboard(program, *options.dashboard)
        controller = Controller(
            program, launch_type=launcher.name, output=output,
            run_id=os.path.basename(folder) if folder else "", states=states,
            dashboard_url=dashboard.url if dashboard else None, host=plan.controller_host,
            one_host=plan.one_host, tls=options.tls,
            **options.clocks.controller_arguments())
    except BaseException:
        _undo(folder, output, dashboard)
        raise
    context.link_launch(program, controller.launcher_context)
    interrupts.watch(controller)
    try:
        if dashboard is not None:
            dashboard.serve(controller)
        launcher.start(plan, controller)
    except BaseException:
        controller.kill()  # whatever had started ends
        with contextlib.suppress(LaunchError):
            controller.wait()
        raise
    if launcher.recorded:  # the launching process owns the program (at_exit.py)
        _record(folder, controller)
        at_exit.wait_for(controller)
    return controller


def _undo(folder: str | None, output: NodeOutput | None, dashboard: Any) -> None:
    """Undoes what was made for a controller that could not be made."""
    if dashboard is not None:
        dashboard.stop()
    if output is not None:
        output.terminal.close()
        with contextlib.suppress(OSError):
            os.rmdir(output.folder)  # (nothing written there yet)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def _record(folder: str, controller: Controller) -> None:
    """Records the run for `launchpad ls`; a registry that cannot be written (a read-only
    home) costs only that, not the launch."""
    try:
        run_registry.register(folder, controller)
    except (OSError, LaunchError) as e:
        logging.warning("launchpad: run of %s not recorded (launchpad ls will not list it): "
                        "%s", controller.program_name, e)


launch.__doc__ = launch_options.document(launch)
