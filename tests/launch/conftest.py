"""Fixtures for launching real programs: one test body per launch type, and leak checks for
threads and processes."""

import ctypes
import os
import threading
import time

import pytest

import launchpad as lp
from tests.launch.helpers import Box

THREAD_LAUNCH_TYPES = ["local_mt", "test_mt"]
PROCESS_LAUNCH_TYPES = ["local_mp", "test_mp"]
LAUNCH_TYPES = THREAD_LAUNCH_TYPES + PROCESS_LAUNCH_TYPES
_PR_SET_CHILD_SUBREAPER = 36


def pytest_configure(config):
    # Orphaned descendants are re-parented to this process instead of init, so a node process
    # that outlives its launcher is still seen (and failed) by `no_leaked_processes`.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def live_descendants() -> set[int]:
    """Pids of this process's live (not zombie) descendants."""
    children: dict[int, list[int]] = {}
    states = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        children.setdefault(int(fields[1]), []).append(int(entry))
        states[int(entry)] = fields[0]
    found, todo = set(), [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return {pid for pid in found if states.get(pid) != "Z"}


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


@pytest.fixture
def no_leaked_processes():
    """Fails the test if a process it started (at any depth) is alive after it ends."""
    before = live_descendants()
    yield
    deadline = time.monotonic() + 10
    leaked = live_descendants() - before
    while leaked and time.monotonic() < deadline:
        time.sleep(0.05)  # polls for processes to vanish: there is no event to wait on
        leaked = live_descendants() - before
    assert not leaked, f"processes left behind: {sorted(leaked)}"


@pytest.fixture
def box(no_leaked_threads):
    """`box()` makes a Box that nodes in any process can put values into."""
    boxes = []

    def make():
        boxes.append(Box())
        return boxes[-1]

    yield make
    for made in boxes:
        made.close()


def _launcher(launch_type, request):
    controllers = []

    def launch(program, **kwargs):
        if launch_type.startswith("test_"):
            kwargs.setdefault("test_case", request)
        controller = lp.launch(program, launch_type=launch_type, **kwargs)
        controllers.append(controller)
        return controller

    return launch, controllers


def _stop_all(controllers, failures_expected=False):
    """Stops every program; a node failure the test did not expect fails it."""
    for controller in controllers:
        controller.stop()
    for controller in controllers:
        try:
            assert controller.wait(timeout=30), "program did not stop"
        except lp.NodeFailedError:
            if not failures_expected:
                raise


@pytest.fixture(params=LAUNCH_TYPES)
def launch(request, no_leaked_threads, no_leaked_processes):
    """`launch(program, **kwargs)` under each launch type; every program is stopped after."""
    launch, controllers = _launcher(request.param, request)
    yield launch
    _stop_all(controllers)


@pytest.fixture(params=["local_mt", "local_mp"])
def launch_local(request, no_leaked_threads, no_leaked_processes):
    """As `launch`, under local_mt and local_mp: for programs expected to fail, whose failure a
    test_* launcher would turn into a failed test."""
    launch, controllers = _launcher(request.param, request)
    yield launch
    _stop_all(controllers, failures_expected=True)


@pytest.fixture
def launch_mp_local(no_leaked_threads, no_leaked_processes, request):
    """As `launch`, under local_mp only: for programs expected to fail."""
    launch, controllers = _launcher("local_mp", request)
    yield launch
    _stop_all(controllers, failures_expected=True)


@pytest.fixture
def launch_one_mp(no_leaked_threads, no_leaked_processes, request):
    """As `launch_mp`, under local_mp only: for programs too heavy to run twice."""
    launch, controllers = _launcher("local_mp", request)
    yield launch
    _stop_all(controllers)


@pytest.fixture(params=PROCESS_LAUNCH_TYPES)
def launch_mp(request, no_leaked_threads, no_leaked_processes):
    """As `launch`, under the process launch types only."""
    launch, controllers = _launcher(request.param, request)
    yield launch
    _stop_all(controllers)
