"""Launchpad's WorkerManager, for workers run without a program (its own tests run too, in
tests/upstream): its workers see its stop through launchpad's stop API, and it never kills
the process it runs in."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

import launchpad as lp
from launchpad.launch import worker_manager
from tests.launch.helpers import TIMEOUT
from tests.processes import ROOT


@pytest.fixture
def manager(monkeypatch, no_leaked_threads):
    monkeypatch.setattr(worker_manager, "_HAS_MAIN_MANAGER", True)  # no kills counted down
    made = worker_manager.WorkerManager()
    yield made
    made.cleanup_after_test(None)


def test_lp_stop_in_a_worker_stops_the_manager_and_every_worker(manager):
    handled = threading.Event()

    def waits():
        lp.register_stop_handler(handled.set)
        assert worker_manager.get_worker_manager() is manager
        return lp.wait_for_stop(TIMEOUT)

    manager.thread_worker("waiter", waits)
    manager.thread_worker("stopper", lp.stop)
    manager.wait()
    assert manager.wait_for_stop(0) and handled.is_set()


def test_a_process_started_elsewhere_is_waited_for(manager):
    process = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                               stdin=subprocess.PIPE)
    manager.register_existing_process("outsider", process.pid)
    assert manager._active_workers["outsider"]
    process.stdin.close()
    manager.wait(["outsider"])
    assert process.wait(TIMEOUT) == 0 and not manager._active_workers["outsider"]


def test_the_manager_of_a_thread_that_has_none_is_an_error_naming_the_alternative():
    with pytest.raises(RuntimeError, match="lp.wait_for_stop"):
        worker_manager.get_worker_manager()


_SIGTERM = textwrap.dedent("""
    import os, signal, sys
    from launchpad.launch import worker_manager
    import launchpad as lp
    manager = worker_manager.WorkerManager()
    manager.thread_worker("waiter", lambda: lp.wait_for_stop(30) or sys.exit(3))
    manager.process_worker("sleeper", [sys.executable, "-c", "import time; time.sleep(30)"])
    os.kill(os.getpid(), signal.SIGTERM)
    manager.wait()
    print("stopped", flush=True)
""")


def test_sigterm_stops_its_threads_and_processes_and_the_process_lives_on(no_leaked_processes):
    result = subprocess.run([sys.executable, "-c", _SIGTERM], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert (result.returncode, result.stdout) == (0, "stopped\n"), result.stderr
