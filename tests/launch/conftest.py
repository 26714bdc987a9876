"""Fixtures for launching real programs: one test body per launch type, and a leak check."""

import threading
import time

import pytest

import launchpad as lp

THREAD_LAUNCH_TYPES = ["local_mt", "test_mt"]


@pytest.fixture
def no_leaked_threads():
    """Fails the test if a thread it started is still alive shortly after it ends."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 10
    for thread in set(threading.enumerate()) - before:
        thread.join(max(0.0, deadline - time.monotonic()))
    leaked = [t.name for t in set(threading.enumerate()) - before if t.is_alive()]
    assert not leaked, f"threads left behind: {leaked}"


@pytest.fixture(params=THREAD_LAUNCH_TYPES)
def launch(request, no_leaked_threads):
    """`launch(program, **kwargs)` under each launch type; every program is stopped after."""
    controllers = []

    def _launch(program, **kwargs):
        if request.param.startswith("test_"):
            kwargs.setdefault("test_case", request)
        controller = lp.launch(program, launch_type=request.param, **kwargs)
        controllers.append(controller)
        return controller

    yield _launch
    for controller in controllers:
        controller.stop()
    for controller in controllers:
        assert controller.wait(timeout=30) or controller.failure, "program did not stop"
