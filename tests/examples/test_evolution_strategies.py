"""examples/evolution_strategies under local_mp: the master's group calls drive the search; a
master killed mid-run (SIGKILL) restarts from its last saved generation and goes on to solve
CartPole; a program stopped and launched again with resume= starts from where it stopped.
(benchmarks/es_resume.py kills the whole program, launcher included.)"""

from __future__ import annotations

import os
import signal
import threading

import pytest

import launchpad as lp
from examples.evolution_strategies import launch as es_launch
from examples.evolution_strategies.es import Worker
from examples.evolution_strategies.launch import make_program
from tests.launch.helpers import TIMEOUT

pytestmark = [pytest.mark.timeout(10 * TIMEOUT),
              pytest.mark.usefixtures("no_leaked_threads", "no_leaked_processes")]


def _until(condition, what: str, seconds: float = 3 * TIMEOUT) -> None:
    pause = threading.Event()
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        pause.wait(0.05)
    raise AssertionError(f"{what} within {seconds}s")


def _master(controller) -> object:
    """A client of the master, once it answers (it may be restarting)."""
    program = controller.program
    return program.groups["master"][0].create_handle().dereference()


def _generation(controller) -> int:
    try:
        return _master(controller).generation()
    except Exception:  # noqa: BLE001 - restarting: not yet
        return -1


def _gated_worker(gate: str) -> type:
    """A Worker that holds generation 3's evaluations until the file `gate` exists: the
    search (which solves in under a second here) cannot pass generation 3 before the test
    has killed its master. Made here, the class travels to the workers by value."""

    class GatedWorker(Worker):
        def evaluate(self, params, noise_seeds, sigma, episode_seed):
            opened = threading.Event()
            for _ in range(int(3 * TIMEOUT / 0.02)):
                if episode_seed < 3 or os.path.exists(gate):
                    break
                opened.wait(0.02)
            return super().evaluate(params, noise_seeds, sigma, episode_seed)

    return GatedWorker


def test_a_killed_master_restarts_from_its_saved_generation_and_solves(tmp_path, monkeypatch):
    monkeypatch.setenv("LAUNCHPAD_RUN_DIR", str(tmp_path))
    gate = tmp_path / "open"
    monkeypatch.setattr(es_launch, "Worker", _gated_worker(str(gate)))
    program = make_program(num_workers=2, target=475.0, save_every_secs=0.2)
    controller = lp.launch(program, launch_type="local_mp", terminal="output_to_files")
    try:
        _until(lambda: _generation(controller) == 3, "generation 3")
        _until(lambda: _saved_generation_or_none(controller) == 3, "generation 3 saved")
        os.kill(controller.pids()["master/0"], signal.SIGKILL)
        assert controller.wait_for_restarts("master/0", 1, TIMEOUT)
        _until(lambda: _generation(controller) >= 0, "the restarted master")
        log, _ = controller.read_log("master", 0, 0, 1 << 20)
        assert b"master: restored at generation 3" in log  # from its saved state, not from 0
        gate.touch()
        assert controller.wait(timeout=6 * TIMEOUT)  # solved: the master stops the program
        assert controller.restarts() == {"master/0": 1}
        assert controller.failure is None
    finally:
        controller.stop()
        controller.wait(timeout=TIMEOUT)


def test_a_stopped_run_resumes_where_it_stopped(tmp_path, monkeypatch):
    monkeypatch.setenv("LAUNCHPAD_RUN_DIR", str(tmp_path))
    first = lp.launch(make_program(num_workers=2, target=1e9, save_every_secs=60),
                      launch_type="local_mp", terminal="output_to_files")
    _until(lambda: _generation(first) >= 2, "generation 2")
    assert first.stop_and_wait()  # the graceful stop saves the master
    stopped_at = _saved_generation(first)
    assert stopped_at >= 2
    second = lp.launch(make_program(num_workers=2, target=1e9, save_every_secs=60),
                       launch_type="local_mp", terminal="output_to_files",
                       resume=first.run_id)
    try:
        _until(lambda: _generation(second) >= 0, "the resumed master")
        assert _generation(second) >= stopped_at
    finally:
        assert second.stop_and_wait()


def _saved_generation_or_none(controller) -> int | None:
    try:
        return _saved_generation(controller)
    except (LookupError, OSError, IndexError):  # nothing saved yet
        return None


def _saved_generation(controller) -> int:
    """The generation of the master's latest saved state (read as a resume reads it)."""
    from launchpad.launch.runtime import state_store
    spec = controller.state_spec("master")
    restored = []

    class Probe:
        def save_state(self):
            return None

        def restore_state(self, state):
            restored.append(state["generation"])

    stopped = threading.Event()
    stopped.set()
    context = type("Stopped", (), {"stop_event": stopped,
                                   "add_stop_handler": lambda self, handler: None})()
    state_store.NodeState(spec, "master/0").attach(Probe(), context)
    return restored[0]
