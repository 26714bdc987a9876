"""The warning of a job's end when Slurm's own does not come: the launch's clock reads the
job's time left from the real test Slurm and stops the program `stop_before_end_secs` before
the limit, saying why (moved with the limit, if an administrator moves it); it lets a program
that ends first be. (Slurm's SIGUSR1 stops a program in test_requeue.py; test_slurm.py's
time-limit test takes whichever comes first.)"""

from __future__ import annotations

import threading

import pytest

import launchpad as lp
from launchpad.launch.slurm import time_limit
from launchpad.launch.slurm.job import SlurmJob, duration_secs
from tests.launch.helpers import TIMEOUT

pytestmark = pytest.mark.usefixtures("no_leaked_processes", "no_leaked_threads")


@pytest.mark.parametrize(("text", "secs"), [
    ("0:00", 0), ("1:05", 65), ("2:00:00", 7200), ("1-00:00:01", 86401),
    ("UNLIMITED", None), ("NOT_SET", None), ("INVALID", None), ("", None), ("1:2:3:4", None)])
def test_slurms_durations_are_read_as_seconds(text, secs):
    assert duration_secs(text) == secs


@pytest.fixture
def two_minute_job(slurm_cluster, monkeypatch):
    """A running Slurm job with a two-minute limit and no --signal (so Slurm warns no one)."""
    for name, value in slurm_cluster.env.items():
        monkeypatch.setenv(name, value)
    job_id = slurm_cluster.run(["sbatch", "--parsable", "--time=2", "--job-name=clocked",
                                "--output=/dev/null", "--wrap", "exec sleep 600"]
                               ).stdout.strip().split(";")[0]
    job = SlurmJob(job_id, None, program="clocked")
    try:
        job.wait_running()
        yield job
    finally:
        job.cancel()


def _waiting_program() -> lp.Program:
    program = lp.Program("clocked")
    program.add_node(lp.PyNode(lp.wait_for_stop), label="worker")
    return program


def _clock_thread(job: SlurmJob) -> threading.Thread:
    return next(thread for thread in threading.enumerate()
                if thread.name == f"lp-slurm-clock-{job.job_id}")


def test_the_launchs_clock_stops_the_program_before_the_time_limit(two_minute_job):
    left = two_minute_job.time_left()
    assert left is not None and 60 < left <= 120
    controller = lp.launch(_waiting_program(), launch_type="local_mt")
    try:
        time_limit.keep_the_clock(two_minute_job, controller, left - 2)  # due in ~2 s
        assert controller.wait(timeout=TIMEOUT)  # stopped, not failed
    finally:
        controller.stop()
    assert controller.stop_reason.startswith(time_limit.END_WARNING)
    assert "own clock" in controller.stop_reason


def test_a_time_limit_moved_moves_the_clocks_stop(two_minute_job, slurm_cluster):
    left = two_minute_job.time_left()
    controller = lp.launch(_waiting_program(), launch_type="local_mt")
    try:
        time_limit.keep_the_clock(two_minute_job, controller, left - 3)  # due in ~3 s...
        slurm_cluster.run(["scontrol", "update", f"JobId={two_minute_job.job_id}",
                           "TimeLimit=4"])  # ...until an administrator gives two minutes more
        assert not controller.wait(timeout=8)  # read again when due: not due any more
        assert _clock_thread(two_minute_job).is_alive()
    finally:
        controller.stop()
    assert controller.wait(timeout=TIMEOUT)
    assert controller.stop_reason == ""


def test_the_clock_lets_a_program_that_stops_first_be(two_minute_job):
    controller = lp.launch(_waiting_program(), launch_type="local_mt")
    time_limit.keep_the_clock(two_minute_job, controller, 5)  # due in about 2 minutes
    clock = _clock_thread(two_minute_job)
    controller.stop()
    assert controller.wait(timeout=TIMEOUT)
    clock.join(TIMEOUT)
    assert not clock.is_alive()
    assert controller.stop_reason == ""


def test_no_clock_without_a_warning(two_minute_job):
    controller = lp.launch(_waiting_program(), launch_type="local_mt")
    try:
        time_limit.keep_the_clock(two_minute_job, controller, 0)
        with pytest.raises(StopIteration):
            _clock_thread(two_minute_job)
    finally:
        controller.stop()
        assert controller.wait(timeout=TIMEOUT)
