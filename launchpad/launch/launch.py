"""`lp.launch`: turns a program into running nodes under a controller.

The launch type picks the launcher module; every launcher shares what is written here:
validating the program, making its controller, and linking the program to it so handles
can be dereferenced in the launching process.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Sequence
from typing import Any

from absl import logging

from launchpad import context
from launchpad import flags as lp_flags
from launchpad.context import LaunchType
from launchpad.courier import TLS
from launchpad.launch import run_registry
from launchpad.launch.kubernetes.settings import KubernetesSettings
from launchpad.launch.launch_options import clocks, ray_settings, slurm_settings
from launchpad.launch.local import live_status
from launchpad.launch.ray.settings import RaySettings
from launchpad.launch.runtime import at_exit, interrupts, terminals
from launchpad.launch.runtime import dry_run as dry_run_lib
from launchpad.launch.runtime import resources as resources_lib
from launchpad.launch.runtime.controller import Controller
from launchpad.launch.runtime.controllers import Controllers
from launchpad.launch.runtime.errors import LaunchError
from launchpad.launch.runtime.resources import Resources
from launchpad.launch.slurm.settings import SlurmSettings
from launchpad.program import Program

# Each launcher module (imported when a launch needs it: `import launchpad`, and every node's
# process, load no launcher they do not use) has launch(program, controller, **options) and
# may have
# validate(**options), called before anything starts.
_LAUNCHERS = {
    LaunchType.LOCAL_MULTI_THREADING: "local.mt",
    LaunchType.TEST_MULTI_THREADING: "local.test_mt",
    LaunchType.LOCAL_MULTI_PROCESSING: "local.mp",
    LaunchType.TEST_MULTI_PROCESSING: "local.test_mp",
    LaunchType.SLURM: "slurm.launcher",
    LaunchType.RAY: "ray.launcher",
    LaunchType.KUBERNETES: "kubernetes.launcher",
}


# Launch types whose programs may outlive the launching process (detach=True): the module's
# launch(program, options, ...) puts the controller in the cluster and returns its proxy.
_DETACHED = {LaunchType.SLURM: "slurm.detached", LaunchType.RAY: "ray.detached",
             LaunchType.KUBERNETES: "kubernetes.launcher"}
# Launch types whose programs are always detached: the launching machine cannot be reached
# from the cluster, so the controller always runs there.
_ALWAYS_DETACHED = {LaunchType.KUBERNETES}


def _module(name: str) -> Any:
    """The launcher module `launchpad.launch.<name>` (of _LAUNCHERS or _DETACHED)."""
    return importlib.import_module(f"launchpad.launch.{name}")


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


def _launch_type(launch_type: LaunchType | str | None) -> LaunchType:
    if not launch_type:
        launch_type = lp_flags.value("lp_launch_type") or lp_flags.DEFAULT_LAUNCH_TYPE
    try:
        launch_type = LaunchType(launch_type)
    except ValueError:
        raise ValueError(f"Unknown launch_type {launch_type!r}; launch types: "
                         f"{', '.join(t.value for t in _LAUNCHERS)}") from None
    if launch_type in _XMANAGER:
        raise ValueError(f"launch_type {launch_type.value!r} cannot run here: "
                         f"{_XMANAGER[launch_type]}")
    return launch_type


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


def _check_local_resources(program: Program, local_resources: dict | None) -> None:
    unknown = sorted(set(local_resources or {}) - set(program.groups))
    if unknown:
        raise ValueError(f"local_resources names groups {unknown} that program "
                         f"{program.name!r} does not have; its groups: {sorted(program.groups)}")


_xm_noted = False


def _ignore_xm_options(given: dict[str, Any], launch_type: LaunchType) -> None:
    """Launchpad's XManager options (xm_resources, controller_xm_requirements) are ignored,
    which is said once."""
    global _xm_noted
    named = [name for name, value in given.items() if value is not None]
    if not named or _xm_noted:
        return
    _xm_noted = True
    logging.info("lp.launch: %s are for XManager launches; launch_type %r ignores them "
                 "(cluster launch types take resources={group: lp.Resources(...)})",
                 " and ".join(named), launch_type.value)


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
           dry_run: bool | None = None) -> Controller | Controllers:
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

    When the launching script returns while a local_mt or local_mp program still runs, the
    interpreter's exit waits for the program to stop, as in Launchpad (see at_exit.py).

    Raises:
      ValueError, TypeError: bad programs or options, named in the message.
    """
    single = isinstance(programs, Program)
    checked = [_check_program(p) for p in ([programs] if single else list(programs))]
    launch_type = _launch_type(launch_type)
    launcher = _module(_LAUNCHERS[launch_type])
    show_status = live_status.wanted(
        bool(lp_flags.value("lp_status") if status is None else status)
        and launch_type in (LaunchType.LOCAL_MULTI_THREADING, LaunchType.LOCAL_MULTI_PROCESSING))
    if show_status and terminal is None and launch_type is LaunchType.LOCAL_MULTI_PROCESSING:
        terminal = terminals.OUTPUT_TO_FILES  # the table owns the terminal
    _ignore_xm_options({"xm_resources": xm_resources,
                        "controller_xm_requirements": controller_xm_requirements}, launch_type)
    options = {"test_case": test_case, "serialize_py_nodes": serialize_py_nodes,
               "local_resources": local_resources, "terminal": terminal,
               "resources": resources,
               "slurm": slurm_settings(slurm) if launch_type is LaunchType.SLURM else slurm,
               "ray": ray_settings(ray) if launch_type is LaunchType.RAY else ray,
               "kubernetes": kubernetes,
               "bind_address": lp_flags.value("lp_bind_address")}
    detach = detach or launch_type in _ALWAYS_DETACHED
    if detach and launch_type not in _DETACHED:
        raise ValueError(f"detach=True needs a cluster launch type "
                         f"({', '.join(t.value for t in _DETACHED)}), not "
                         f"{launch_type.value!r}: a local program lives in the process that "
                         "launched it")
    if hasattr(launcher, "validate"):
        launcher.validate(**options)
    for program in checked:
        _check_local_resources(program, local_resources)
        resources_lib.per_group(list(program.groups), program.name, resources)
    if lp_flags.value("lp_dry_run") if dry_run is None else dry_run:
        runs = [dry_run_lib.DryRun(p, launch_type.value, dry_run_lib.plan(
            p, launch_type.value, launcher, options)).say() for p in checked]
        return runs[0] if single else Controllers(runs)
    dashboard = _dashboard_port(dashboard_port, len(checked), detach)
    timing = clocks(launch_type, termination_notice_secs, liveness_timeout_secs,
                    startup_timeout_secs)
    tls = _tls(tls)
    if detach:
        host = ""  # the controller is made inside the cluster, where it runs
    elif hasattr(launcher, "controller_host"):
        host = launcher.controller_host(**options)
    else:
        host = "127.0.0.1"
    controllers: list = []
    for program in checked:
        if detach:  # the controller runs in the cluster; so does the program
            controllers.append(_module(_DETACHED[launch_type]).launch(
                program, options, tls=tls, **timing))
            continue
        controller = Controller(program, host=host, tls=tls, launch_type=launch_type.value,
                                **timing)
        context.link_launch(program, controller.launcher_context)
        interrupts.watch(controller)
        try:
            if dashboard is not None:  # before any node starts: a port taken fails the launch
                from launchpad.launch.dashboard import server as dashboard_server
                dashboard_server.serve(controller, *dashboard)
            launcher.launch(program, controller, **options)
        except BaseException:
            controller.kill()  # whatever had started ends; the error is the caller's
            with contextlib.suppress(LaunchError):
                controller.wait()
            raise
        controllers.append(controller)
        if launch_type in _RECORDED:
            _record(controller)
        if show_status:
            live_status.start(controller)
        _at_interpreter_exit(controller, launch_type, test_case)
    return controllers[0] if single else Controllers(controllers)


# Launch types whose programs belong to the launching process, not to a test: the exit
# waits for them (at_exit.py), and `launchpad ls` lists them (run_registry.py).
_RECORDED = {LaunchType.LOCAL_MULTI_THREADING, LaunchType.LOCAL_MULTI_PROCESSING,
             LaunchType.SLURM, LaunchType.RAY}


def _record(controller: Controller) -> None:
    """Records the run for `launchpad ls`; a registry that cannot be written (a read-only
    home) costs only that, not the launch."""
    try:
        run_registry.register(controller)
    except (OSError, LaunchError) as e:
        logging.warning("launchpad: run of %s not recorded (launchpad ls will not list it): "
                        "%s", controller.program_name, e)


def _dashboard_port(port: int | None, programs: int, detach: bool) -> tuple[int, str] | None:
    """The dashboard's port and what asked for it (for errors), or None for no dashboard."""
    origin = f"dashboard_port={port!r}"
    if port is None:
        port = lp_flags.value("lp_dashboard_port")
        origin = f"--lp_dashboard_port={port}"
    if not port:
        return None
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise ValueError(f"{origin}: a dashboard port must be an int in 1..65535 "
                         "(0 or None: no dashboard)")
    if programs > 1:
        raise ValueError(f"{origin}: a dashboard shows one program; launch {programs} "
                         "programs with one each, separately")
    if detach:
        raise ValueError(f"{origin}: the dashboard is served by the controller's process, "
                         "which a detached launch puts in the cluster")
    return port, origin


def _tls(tls: TLS | bool | None) -> TLS | None:
    if tls is True:
        return TLS.generate()
    if tls is None or tls is False or isinstance(tls, TLS):
        return tls or None
    raise TypeError(f"tls must be an lp.TLS, True (made for this launch) or None, got {tls!r}")


def _at_interpreter_exit(controller: Controller, launch_type: LaunchType,
                         test_case: Any) -> None:
    """What the interpreter's exit does with the program if it still runs (at_exit.py): local
    programs are waited for; a test_mt program without a test case is stopped (with one, the
    test's cleanup stops it)."""
    if launch_type in _RECORDED:
        at_exit.wait_for(controller)
    elif launch_type is LaunchType.TEST_MULTI_THREADING and test_case is None:
        at_exit.stop(controller)
