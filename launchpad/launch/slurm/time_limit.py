"""The warning of a job's end: a program stops gracefully `stop_before_end_secs` before its
Slurm job's time limit, or when the job is preempted.

Two ways reach the program, and the first stops it (the other then finds it stopping):

    Slurm's signal   `sbatch --signal=USR1@SECS`: slurmctld sends SIGUSR1 to the job's steps,
                     the host agents pass it to every node, whose runner stops the program
                     (node_process/runner.py); preemption with PreemptParameters=
                     send_user_signal comes this way too
    our own clock    the program's controller reads the job's time left (squeue) once the job
                     runs, and stops the program when only SECS are left (read again then: a
                     time limit an administrator moved moves the stop with it)

The clock is needed because Slurm sends its warning once, from slurmctld's periodic check
(every 30 s, early by up to that much), to the steps alive then: a check that comes before
the host agents' steps have started warns no node, and is not repeated.
"""

from __future__ import annotations

import threading

from absl import logging

from launchpad.launch.runtime.controller import Controller
from launchpad.launch.slurm.errors import SlurmError
from launchpad.launch.slurm.job import SlurmJob

# How the reason for such a stop begins (a detached job that requeues itself looks for it).
END_WARNING = "Slurm warned that the job ends soon"
_DUE_SECS = 1  # squeue counts the time left in whole seconds


def stop_signals(stop_before_end_secs: int) -> dict[str, str]:
    """The signals that stop the program, by name, with the reason each gives."""
    if not stop_before_end_secs:
        return {}
    return {"SIGUSR1": f"{END_WARNING} (its time limit is at most {stop_before_end_secs}s "
                       "away, or it is being preempted)"}


def keep_the_clock(job: SlurmJob, controller: Controller, stop_before_end_secs: int) -> None:
    """Stops `controller`'s program `stop_before_end_secs` before `job`'s time limit, unless
    it stops or ends first (a thread; nothing without a warning or a time limit)."""
    if stop_before_end_secs:
        threading.Thread(target=_clock, args=(job, controller, stop_before_end_secs),
                         name=f"lp-slurm-clock-{job.job_id}", daemon=True).start()


def _clock(job: SlurmJob, controller: Controller, stop_before_end_secs: int) -> None:
    try:
        job.wait_running()
    except SlurmError:
        return  # it never ran: nothing to warn
    over = threading.Event()
    controller.on_finish(over.set)
    controller.stop_future().add_done_callback(lambda _: over.set())
    # The time left is read again when it is due: a limit moved meanwhile (`scontrol update
    # TimeLimit=`) moves the warning with it.
    while (left := job.time_left()) is not None and left - stop_before_end_secs > _DUE_SECS:
        if over.wait(left - stop_before_end_secs):
            return
    if left is None or over.is_set():
        return  # no time limit (or the job has left the queue)
    logging.info("Slurm job %s: %ds left and no warning from Slurm yet; stopping the program",
                 job.job_id, stop_before_end_secs)
    controller.stop(f"{END_WARNING} (its time limit is {stop_before_end_secs}s away, by the "
                    "launch's own clock: Slurm's SIGUSR1 had not come)")
