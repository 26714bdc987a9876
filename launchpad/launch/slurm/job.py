"""A program's Slurm job: submitted from its Placement, watched while it pends, cancelled once.

    SlurmJob.submit(placement, ...)   sbatch --test-only, then sbatch (Slurm's refusal named)
    while pending                     squeue's state and reason -> on_pending(state, reason):
                                      at each change, and at least once a minute; a reason
                                      Slurm never recovers from (FATAL_REASONS), or a wait past
                                      SlurmSettings.pending_timeout_secs, cancels the job and
                                      fails it, named
    running                           hosts(component): the hostnames of each component;
                                      time_left(): seconds to its time limit
    cancel()                          scancel, once, and waits for the job to leave the queue

Slurm has no event for a job's state: it is read with squeue, every 0.2 s for the first 10 s
(a free cluster starts a job in about a second) and every 2 s after, which a real slurmctld
serving many users bears.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import threading
import time
from collections.abc import Callable, Sequence

from absl import logging

from launchpad.launch.slurm.errors import SlurmError
from launchpad.launch.slurm.placement import Placement

RUNNING = "RUNNING"
WAITING = ("PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING")
_LIVE = {RUNNING, "COMPLETING", "SUSPENDED", "STOPPED", *WAITING}  # the job is not over
_FAST_POLL_SECS, _SLOW_POLL_SECS, _FAST_FOR_SECS = 0.2, 2.0, 10.0
REPORT_EVERY_SECS = 60.0  # an unchanged pending state is said again this often
_END_TIMEOUT_SECS = 30.0
# Reasons a pending job never leaves by itself: waiting on is waiting for ever.
FATAL_REASONS = {
    "PartitionConfig": "it asks for more than its partition's configuration allows",
    "PartitionNodeLimit": "it asks for more nodes than its partition allows a job",
    "PartitionTimeLimit": "its time limit is above its partition's",
    "PartitionDown": "its partition is down",
    "PartitionInactive": "its partition is inactive",
    "BadConstraints": "no host satisfies its constraints",
    "InvalidAccount": "its account is not valid",
    "InvalidQOS": "its QOS is not valid",
    "DependencyNeverSatisfied": "a job it depends on can never let it start",
}


def pending_text(state: str, reason: str) -> str:
    """A waiting job's state and Slurm's reason, as a program's status says them."""
    return f"Slurm job {state.lower()} ({reason or 'not yet scheduled'})"


def duration_secs(text: str) -> int | None:
    """Slurm's "[days-][hours:]minutes:seconds" (squeue's %L) in seconds; None for what is
    not a duration ("UNLIMITED", "NOT_SET", "INVALID")."""
    days, _, clock = text.strip().rpartition("-")
    try:
        parts = [int(part) for part in clock.split(":")]
        day_secs = int(days) * 86400 if days else 0
    except ValueError:
        return None
    if not 1 <= len(parts) <= 3 or min(parts) < 0:
        return None
    clock_secs = 0
    for part in parts:
        clock_secs = clock_secs * 60 + part
    return day_secs + clock_secs


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The launching environment, where `import launchpad` finds this launchpad."""
    package = importlib.util.find_spec("launchpad")  # (imported already: its spec is kept)
    source = os.path.dirname(os.path.dirname(os.path.abspath(package.origin)))
    path = os.pathsep.join(p for p in (source, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, **(extra or {})}


def run(argv: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess:
    """Runs a Slurm client command. Raises: SlurmError naming it, with its output."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, env=environment())
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SlurmError(f"`{' '.join(argv[:3])} ...` failed: {e}") from e
    if done.returncode != 0:
        raise SlurmError(f"`{' '.join(argv[:3])} ...` failed (exit {done.returncode}): "
                         f"{done.stderr.strip() or done.stdout.strip()}")
    return done


class SlurmJob:
    """The program's allocation: `submit()`ted at launch (or the job this process runs in),
    cancelled when the program ends.

    Args:
      on_pending: called with (state, reason) while the job waits to run: at each change,
        at least every REPORT_EVERY_SECS, and with ("RUNNING", "") once it runs.
      pending_timeout_secs: fail (and cancel) a job still pending after this long.
    """

    def __init__(self, job_id: str, placement: Placement | None, running: bool = False,
                 ends_with_this_process: bool = False,
                 on_pending: Callable[[str, str], None] | None = None,
                 pending_timeout_secs: float | None = None, program: str = ""):
        self.job_id = job_id
        self.placement = placement
        self._program = program or (placement.program if placement else "")
        self._lock = threading.Lock()
        self._started = threading.Event()
        self._ended = ends_with_this_process  # a batch step's own job: never cancelled here
        self._on_pending = on_pending or (lambda state, reason: None)
        self._pending_timeout = pending_timeout_secs
        self._hosts: dict[int, list[str]] | None = None
        self.error: str = ""
        if running:
            self._started.set()
        else:
            threading.Thread(target=self._wait_running, name=f"lp-slurm-{job_id}",
                             daemon=True).start()

    @classmethod
    def submit(cls, placement: Placement, argv: Sequence[str], **options) -> SlurmJob:
        """Submits `argv` (placement.sbatch_argv(...)); `options` as the constructor's.

        Raises:
          SlurmError: Slurm refused it, or says it could never run it (with its reason).
        """
        run(["sbatch", "--test-only", *argv[2:]])
        job = cls(run(list(argv)).stdout.strip().split(";")[0], placement, **options)
        logging.info("Program %s is Slurm job %s", placement.program, job.job_id)
        return job

    def _wait_running(self) -> None:
        started = time.monotonic()
        said: tuple[str, str] | None = None
        said_at = 0.0
        while not self._started.is_set():
            states, waiting_for = self._states()
            waited = time.monotonic() - started
            if states == {RUNNING}:
                self._started.set()
                self._on_pending(RUNNING, "")
                return
            if not states or not states <= {RUNNING, *WAITING}:
                self._fail(f"Slurm job {self.job_id} ended before it ran (state "
                           f"{', '.join(sorted(states)) or 'gone'})", cancel=False)
                return
            reason = waiting_for.split(",")[0].strip()
            if reason in FATAL_REASONS:
                self._fail(f"Slurm job {self.job_id} of program {self._program!r} can never "
                           f"start: it pends with reason {reason} ({FATAL_REASONS[reason]}); "
                           "it was cancelled")
                return
            if self._pending_timeout is not None and waited > self._pending_timeout:
                self._fail(f"Slurm job {self.job_id} of program {self._program!r} still "
                           f"pends ({waiting_for or 'no reason given'}) after "
                           f"pending_timeout_secs={self._pending_timeout:g}; it was cancelled")
                return
            now = (min(states - {RUNNING}), waiting_for)
            if now != said or time.monotonic() - said_at >= REPORT_EVERY_SECS:
                said, said_at = now, time.monotonic()
                self._on_pending(*now)
            self._started.wait(_FAST_POLL_SECS if waited < _FAST_FOR_SECS else _SLOW_POLL_SECS)

    def _fail(self, error: str, cancel: bool = True) -> None:
        self.error = error
        self._started.set()
        if cancel:
            self.cancel()

    @property
    def running(self) -> bool:
        return self._started.is_set() and not self.error

    def wait_running(self) -> None:
        """Returns once the job runs. Raises: SlurmError if it ended or was cancelled."""
        self._started.wait()
        if self.error:
            raise SlurmError(self.error)

    def hosts(self, component: int) -> list[str]:
        """The hostnames of the running job's `component`, in Slurm's order."""
        with self._lock:
            if self._hosts is None:
                found: dict[int, list[str]] = {}
                for job, nodelist in self._rows("%i|%N"):
                    g = int(job.split("+")[1]) if "+" in job else 0
                    found[g] = run(["scontrol", "show", "hostnames", nodelist]).stdout.split()
                self._hosts = found
        if component not in self._hosts:
            raise SlurmError(f"Slurm job {self.job_id} has no component {component} running")
        return self._hosts[component]

    def time_left(self) -> int | None:
        """Seconds until the running job's time limit (the soonest of its components'), as
        Slurm counts it; None without a limit, or once the job has left the queue."""
        lefts = [duration_secs(row[0]) for row in self._rows("%L")]
        known = [left for left in lefts if left is not None]
        return min(known) if known else None

    def cancel(self) -> None:
        """Ends the job (and so every step left of it); safe to call more than once."""
        with self._lock:
            if self._ended:
                return
            self._ended = True
        if not self._started.is_set():
            self.error = f"Slurm job {self.job_id} was cancelled before it ran"
            self._started.set()
        try:
            run(["scancel", self.job_id])
        except SlurmError as e:
            logging.warning("Cancelling Slurm job %s failed: %s", self.job_id, e)
            return
        deadline = time.monotonic() + _END_TIMEOUT_SECS
        while self.alive() and time.monotonic() < deadline:
            time.sleep(_FAST_POLL_SECS)  # Slurm has no event for a job's end either
        if self.alive():
            logging.warning("Slurm job %s still runs %gs after scancel", self.job_id,
                            _END_TIMEOUT_SECS)

    def alive(self) -> bool:
        """Whether the job is pending or running (not over)."""
        return bool({row[0] for row in self._rows("%T")} & _LIVE)

    def waiting(self) -> str:
        """What the job waits for before it runs, as a program's status says it ("Slurm job
        pending (Resources)"); '' once it runs, or has ended."""
        states, waiting_for = self._states()
        if not states or RUNNING in states or not states <= set(WAITING):
            return ""
        return pending_text(min(states), waiting_for)

    def _states(self) -> tuple[set[str], str]:
        """The job's states (one per component) and Slurm's reason for a component that
        does not run ('' when the scheduler has not looked at it yet)."""
        rows = self._rows("%T|%r")
        waiting_for = next((row[1] for row in rows if row[0] != RUNNING), "")
        return {row[0] for row in rows}, "" if waiting_for == "None" else waiting_for

    def _rows(self, fields: str) -> list[list[str]]:
        """squeue's rows of this job (one per component), its `fields` split at '|'."""
        try:
            out = run(["squeue", "-h", "-j", self.job_id, "-o", fields]).stdout
        except SlurmError:
            return []  # squeue forgets ended jobs (and then refuses the id)
        return [line.split("|") for line in out.splitlines() if line.strip()]
