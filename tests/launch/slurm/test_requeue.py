"""SlurmSettings(requeue=True) on the real test Slurm: a detached program whose job is warned of
its end stops gracefully, its stateful nodes saved, and its job requeues itself; run again
under the same run id, its nodes start from their states. An attached launch refuses it."""

from __future__ import annotations

import threading

import pytest

import launchpad as lp
from launchpad.launch.slurm import detached as slurm_detached
from launchpad.launch.slurm.job import run
from tests.launch.helpers import TIMEOUT

pytestmark = pytest.mark.timeout(8 * TIMEOUT)


class Remembering:
    """Counts the runs of its node, across requeues (its state); says each."""

    def __init__(self, results):
        self._results = results
        self._runs = 0

    def run(self):
        self._runs += 1
        self._results.put(self._runs)
        lp.wait_for_stop()

    def save_state(self):
        return self._runs

    def restore_state(self, state):
        self._runs = state


def _program(results) -> lp.Program:
    program = lp.Program("requeued")
    with program.group("worker", state=lp.StatePolicy(every_secs=60)):
        program.add_node(lp.CourierNode(Remembering, results))
    return program


def test_a_warned_job_saves_requeues_itself_and_goes_on_from_its_states(slurm, box,
                                                                         tmp_path):
    results = box()
    controller = slurm(_program(results), detach=True,
                       slurm=lp.SlurmSettings(run_dir=str(tmp_path), requeue=True))
    assert results.get() == 1
    # Slurm's warning of the job's end, as at its time limit or a preemption: USR1 to the
    # job's steps (the nodes, through their host's agent).
    run(["scancel", "--signal=USR1", controller.job_id])
    _until(lambda: slurm_detached.requeues_of(controller.run_dir) == 1, "the requeue")
    assert "pending" in controller.status().state
    # Slurm holds a requeued job 2 minutes (its BeginTime); the test lets it go at once.
    _until(lambda: _starts_now(controller.job_id), "the requeued job back in the queue")
    assert results.get(timeout=4 * TIMEOUT) == 2  # its saved state: one run before this one
    assert controller.run_id == lp.attach(controller.run_id, str(tmp_path)).run_id
    controller.stop()
    assert controller.wait(TIMEOUT)


def _starts_now(job_id: str) -> bool:
    """Lifts a requeued job's hold (its BeginTime); False while it is not pending yet."""
    try:
        run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"])
        return True
    except lp.SlurmError:  # still ending its first run
        return False


def _until(condition, what: str) -> None:
    pause = threading.Event()
    for _ in range(int(2 * TIMEOUT / 0.1)):
        if condition():
            return
        pause.wait(0.1)
    raise AssertionError(f"{what} did not come within {2 * TIMEOUT}s")


def test_requeue_needs_a_detached_launch_and_a_warning(slurm, box, tmp_path):
    with pytest.raises(ValueError, match=r"requeue=True\) needs detach=True"):
        slurm(_program(box()), slurm=lp.SlurmSettings(run_dir=str(tmp_path), requeue=True))
    with pytest.raises(ValueError, match="needs stop_before_end_secs > 0"):
        lp.SlurmSettings(requeue=True, stop_before_end_secs=0)
