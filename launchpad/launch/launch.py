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
from launchpad.context import LaunchType
from launchpad.courier import TLS
from launchpad.launch import launchers, run_registry
from launchpad.launch import options as launch_options
from launchpad.launch.kubernetes.settings import KubernetesSettings
from launchpad.launch.ray.settings import RaySettings
from launchpad.launch.runtime import at_exit, interrupts, state_store
from launchpad.launch.runtime.controller import Controller
from launchpad.launch.runtime.controllers import Controllers
from launchpad.launch.runtime.dry_run import DryRun
from launchpad.launch.runtime.errors import LaunchError
from launchpad.launch.runtime.launcher import Launcher, LaunchOptions
from launchpad.launch.runtime.resources import Resources
from launchpad.launch.runtime.terminals import NodeOutput
from launchpad.launch.slurm.settings import SlurmSettings
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
           slurm: SlurmSettings | None = None,
           ray: RaySettings | None = None,
           kubernetes: KubernetesSettings | None = None,
           tls: TLS | bool | None = None,
           liveness_timeout_secs: float = 10.0,
           startup_timeout_secs: float | None = None,
           detach: bool = False,
           status: bool | None = None,
           dashboard_port: int | None = None,
           dry_run: bool | None = None,
           resume: str | None = None,
           resume_partial: bool = False) -> Controller | Controllers:
    """Launches a program (or several) and returns its controller (or a list of them, which
    also waits for and stops them all: Controllers).

    Args:
      programs: the program, or a list of programs, to launch.
      launch_type: a LaunchType or its value; None reads --lp_launch_type (default local_mt).
        Launchpad's local_docker and vertex_ai (XManager's) are refused, naming the launch
        type that runs such a program here.
      xm_resources: Launchpad's XManager resources (group -> lp.DockerConfig); local launch
        types accept and ignore them, so code written for Launchpad runs unchanged.
      local_resources: per-group settings for process launchers: group label ->
        lp.PythonProcess(args=, env=, interpreter=); thread launchers only check the labels.
      test_case: for test_* launch types, the unittest.TestCase (or pytest `request`) whose
        cleanup stops the program; a node failure then fails the test. test_mt may go
        without one, as in Launchpad: the program then runs until it is stopped, or until
        the interpreter exits, which stops it.
      terminal: where process launchers send node output: 'current_terminal' (default),
        'output_to_files' or 'tmux_session' (or $LAUNCHPAD_LAUNCH_LOCAL_TERMINAL); thread
        launchers share the launching process's own output.
      serialize_py_nodes: pickle and unpickle each node before it runs in a thread, to catch
        unpicklable nodes early (default: True for test_mt, False for local_mt).
      controller_xm_requirements: Launchpad's XManager requirements of its controller job;
        accepted and ignored, as xm_resources are.
      termination_notice_secs: seconds nodes get to finish after a stop (default 10, or
        --lp_termination_notice_secs).
      resources: per-group needs for cluster launch types: group label -> lp.Resources
        (default one CPU per node); local launch types check the labels only.
      slurm: lp.SlurmSettings for launch_type="slurm" (partition, account, time limit, ...).
      ray: lp.RaySettings for launch_type="ray" (the cluster to join, runtime_env,
        placement of groups).
      kubernetes: lp.KubernetesSettings for launch_type="kubernetes" (the image, required;
        namespace, service account, ...). Kubernetes launches are always detached: the
        controller runs in the cluster.
      tls: run every courier server and client of the program over TLS with mutual
        authentication: an lp.TLS, or True for certificates made for this launch (needs
        the `cryptography` package); the token stays required either way.
      liveness_timeout_secs: a node process whose heartbeats stop this long (its host lost,
        its process frozen) fails, or is restarted by its group's policy (default 10).
      startup_timeout_secs: a node whose process (Ray: actor) was made this long ago and
        has not yet reported that it started - its interpreter or an import at start-up
        hangs, the resources it needs never become free - fails, named, or is restarted by
        its group's policy (default 600; a Slurm job's wait in the queue does not count).
        Under kubernetes: lp.KubernetesSettings(startup_timeout_secs=...).
      detach: put the controller inside the cluster (under slurm: the job's batch step;
        under ray: a detached actor) and return at once a controller whose `run_id`
        `lp.attach(run_id)` reconnects to later; the program outlives the launching process.
        Local launch types refuse it.
      status: local launch types: a live table of the nodes in the launching terminal
        (None: --lp_status); off when the output is not a terminal (live_status.py).
      dashboard_port: serve the program's web dashboard (its graph, nodes, failures, logs,
        RPC metrics) and Prometheus' /metrics on this port of 127.0.0.1, from the launching
        process, until the program stops; the URL to open, with the token every request
        needs, is printed and kept as `controller.dashboard_url` (needs the `dashboard`
        extra). None reads --lp_dashboard_port; 0: no dashboard.
      dry_run: check everything, print what would be started - under slurm each node's
        host slot and the sbatch request - and start nothing (dry_run.py); lp.launch then
        returns a DryRun, whose waits return at once. None reads --lp_dry_run.
      resume: the run id of an earlier run of this program: every node of a group that
        keeps state (lp.StatePolicy) starts from its latest state of that run (None reads
        --lp_resume). A program whose groups differ from that run's is refused, naming them.
      resume_partial: resume even where the groups differ (the nodes that match start from
        their states).

    When the launching script returns while a local_mt or local_mp program still runs, the
    interpreter's exit waits for the program to stop, as in Launchpad (see at_exit.py).

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
        resources=resources, slurm=slurm, ray=ray, kubernetes=kubernetes, tls=tls,
        liveness_timeout_secs=liveness_timeout_secs, startup_timeout_secs=startup_timeout_secs,
        detach=detach, status=status, dashboard_port=dashboard_port, dry_run=dry_run,
        resume=resume, resume_partial=resume_partial)
    for program in checked:
        launch_options.check_program(program, options)
        launcher.validate(program, options)
    if options.dry_run:
        started = [DryRun(p, launcher.name, launcher.plan(p, options)).say() for p in checked]
    elif options.detach:  # the controller runs in the cluster; so does the program
        started = [launcher.launch_detached(program, options) for program in checked]
    else:
        host = launcher.controller_host(options)
        started = [_start(program, launcher, options, host) for program in checked]
    return started[0] if single else Controllers(started)


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


def _start(program: Program, launcher: Launcher, options: LaunchOptions,
           host: str) -> Controller:
    """Starts `program` with its controller in this process: what the controller is given
    is made first (its run's folder, where its nodes write, its dashboard's port); whatever
    had started when the launch fails ends, and the error is the caller's."""
    # The run's folder: its record, and its nodes' states (kept, for a later resume=).
    stateful = bool(program.state_policies) or options.resume is not None
    folder = run_registry.new_run(program.name) if launcher.recorded or stateful else None
    output = dashboard = None
    try:
        states = (state_store.prepare(program, os.path.basename(folder),
                                      state_store.state_folder(folder), options.resume,
                                      options.resume_partial) if stateful else None)
        output = launcher.node_output(program, options)
        if options.dashboard is not None:  # a port taken fails the launch
            from launchpad.launch.dashboard import server as dashboard_server
            dashboard = dashboard_server.Dashboard(program, *options.dashboard)
        controller = Controller(
            program, launch_type=launcher.name, output=output,
            run_id=os.path.basename(folder) if folder else "", states=states,
            dashboard_url=dashboard.url if dashboard else None, host=host, tls=options.tls,
            **options.clocks.controller_arguments())
    except BaseException:
        _undo(folder, output, dashboard)
        raise
    context.link_launch(program, controller.launcher_context)
    interrupts.watch(controller)
    try:
        if dashboard is not None:
            dashboard.serve(controller)
        launcher.launch(program, controller, options)
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
            os.rmdir(output.run_dir)  # (nothing written there yet)
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
