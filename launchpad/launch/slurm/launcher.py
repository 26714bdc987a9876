"""slurm: a program as one Slurm job (slurm/submission.py says its steps).

    lp.launch(program, launch_type="slurm",
              resources={"learner": lp.Resources(cpus=4, gpus=1), "actor": lp.Resources()},
              slurm=lp.SlurmSettings(partition="gpu", time_limit="2:00:00"))
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys

from launchpad import address
from launchpad import flags as lp_flags
from launchpad.launch.runtime import terminals
from launchpad.launch.runtime.controller import Controller
from launchpad.launch.runtime.errors import LaunchError
from launchpad.launch.runtime.launcher import (
    Detach,
    DetachedRuns,
    Launcher,
    LaunchOptions,
    Plan,
)
from launchpad.launch.slurm import job_holder
from launchpad.launch.slurm.job import SlurmJob
from launchpad.launch.slurm.settings import SlurmSettings
from launchpad.launch.slurm.submission import (
    COMMANDS,
    node_output,
    pending_reporter,
    placement_of,
    sbatch_argv,
    slurmctld_address,
    start_nodes,
)
from launchpad.program import Program


class SlurmLauncher(Launcher):
    """slurm: a program as one Slurm job (see the module doc)."""

    name = "slurm"
    detach = Detach.OPTIONAL
    recorded = True
    terminals = frozenset({terminals.CURRENT_TERMINAL, terminals.OUTPUT_TO_FILES})
    terminals_note = "use 'current_terminal' or 'output_to_files'"
    process_fields = frozenset({"args", "env", "interpreter"})
    process_note = ("args, env or interpreter only (its nodes' steps run that interpreter, "
                    "without interpreter_args)")

    def settings_from_flags(self) -> SlurmSettings | None:
        given = {name: lp_flags.value(f"lp_slurm_{name}") for name in lp_flags.SLURM_FLAGS}
        given = {name: value for name, value in given.items() if value is not None}
        return SlurmSettings(**given) if given else None

    def prepare(self, program: Program, options: LaunchOptions) -> Plan:
        """Refuses a launch without Slurm's commands, or whose layout cannot fit (with the
        numbers); the plan says each node's host slot and the sbatch request."""
        missing = [c for c in COMMANDS if shutil.which(c) is None]
        if missing:
            raise LaunchError(f"launch_type='slurm' needs Slurm's client commands, and "
                              f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
                              "not on PATH: run the launch where Slurm is installed (a login "
                              "node)")
        settings = options.settings or SlurmSettings()
        if settings.requeue and not options.detach:
            raise ValueError("SlurmSettings(requeue=True) needs detach=True: the requeued job "
                             "runs the program's controller again, which an attached launch "
                             "keeps in the launching process")
        placement = placement_of(program, options.resources, settings)
        description = placement.describe(sbatch_argv(
            placement, settings, "RUN_DIR", ["python", "-m", "launchpad.launch", "..."]))
        plan = Plan(program, options, description, layout=placement)
        if not options.starts_here:
            return plan
        # This host's address on the route to slurmctld, unless the settings say.
        host = settings.controller_host or address.routed_host(slurmctld_address())
        return dataclasses.replace(plan, controller_host=host,
                                   output=node_output(program, options))

    def start(self, plan: Plan, controller: Controller) -> None:
        """Submits the program as one Slurm job and starts its nodes once it runs."""
        settings = plan.options.settings or SlurmSettings()
        run_dir = plan.output.folder
        holder = os.path.join(run_dir, "job.holder")
        job_holder.write(holder, job_holder.HolderSpec(
            controller.address, controller.token, controller.tls,
            controller.liveness_timeout_secs))
        argv = sbatch_argv(plan.layout, settings, run_dir,
                           [sys.executable, "-m", "launchpad.launch", "--hold", holder])
        controller.set_pending("Slurm job submitted")
        job = SlurmJob.submit(plan.layout, argv, on_pending=pending_reporter(controller),
                              pending_timeout_secs=settings.pending_timeout_secs)
        start_nodes(plan.program, controller, job, plan.options, plan.output)

    def detached_runs(self) -> DetachedRuns:
        from launchpad.launch.slurm import detached  # (what a detached launch needs)
        return detached.DetachedSlurmRuns()
