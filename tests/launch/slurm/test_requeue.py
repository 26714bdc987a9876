"""SlurmSettings(requeue=True) on the real test Slurm: a detached program whose job is warned of
its end stops gracefully, its stateful nodes saved, and its job requeues itself; run again
under the same run id, its nodes start from their states (the evolution-strategies example's
master too, from its saved generation). An attached launch refuses it."""

from __future__ import annotations

import os
import threading

import pytest

import launchpad as lp
from examples.evolution_strategies.launch import make_program
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
    # (its status is None while the job ends its first run, then pending until it runs)
    _until(lambda: getattr(controller.status(), "state", None) == "pending",
           "the requeued run shown pending")
    # (Slurm holds a requeued job as long as credentials last: 20 s in the test cluster)
    assert results.get(timeout=4 * TIMEOUT) == 2  # its saved state: one run before this one
    assert controller.run_id == lp.attach(controller.run_id, str(tmp_path)).run_id
    controller.stop()
    assert controller.wait(timeout=TIMEOUT)


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


def test_evolution_strategies_requeued_goes_on_from_its_saved_generation(slurm,
                                                                          tmp_path):
    """Detached, with SlurmSettings(requeue=True): Slurm's warning of the job's end (sent by
    scancel, as at a time limit) makes the master save and the job requeue itself; run again
    under the same run id, the master goes on from its saved generation to the last one."""
    program = make_program(num_workers=2, target=1e9, max_generations=30,
                           save_every_secs=0.5)
    controller = slurm(program, detach=True,
                       slurm=lp.SlurmSettings(run_dir=str(tmp_path), requeue=True))
    log = os.path.join(controller.run_dir, "master.0.log")
    _until(lambda: "generation 3:" in _read(log), "generation 3")
    run(["scancel", "--signal=USR1", controller.job_id])
    _until(lambda: slurm_detached.requeues_of(controller.run_dir) == 1, "the requeue")
    assert controller.wait(timeout=6 * TIMEOUT)  # the last generation stops the program
    restored = [int(line.rsplit(" ", 1)[1]) for line in _read(log).splitlines()
                if "restored at generation" in line]
    assert restored and restored[-1] >= 3, _read(log)
    assert "generation 30:" in _read(log)


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""

