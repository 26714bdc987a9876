"""Fixtures of every test folder: checks that a test leaves no thread or process behind, and
runs recorded where the user's own `launchpad ls` does not see them, node output files kept out
of /tmp/launchpad_out. Under CI ($CI set), a test of a real engine (marked slurm, ray or
kubernetes) that skips fails instead: CI installs every engine, so a skip there is a suite
that silently stopped running."""

import ctypes
import os
import threading
import time

import pytest

from tests.processes import live_descendants

pytest_plugins = ["tests.cluster.fixtures"]

_PR_SET_CHILD_SUBREAPER = 36


ENGINE_MARKS = {"slurm", "ray", "kubernetes"}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if (report.skipped and os.environ.get("CI")
            and ENGINE_MARKS & {mark.name for mark in item.iter_markers()}):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"an engine's test skipped under CI, where it must run: {reason}"


def pytest_configure(config):
    # Orphaned descendants are re-parented to this process instead of init, so a node process
    # that outlives its launcher is still seen (and failed) by `no_leaked_processes`.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _variable_naming_a_session_folder(tmp_path_factory, variable: str, name: str):
    """Sets `variable` to a new folder of the session while the session runs."""
    before = os.environ.get(variable)
    os.environ[variable] = str(tmp_path_factory.mktemp(name))
    yield
    os.environ.pop(variable)
    if before is not None:
        os.environ[variable] = before


@pytest.fixture(autouse=True, scope="session")
def run_records_of_the_session(tmp_path_factory):
    """Runs the tests launch (in this process or in scripts it starts) are recorded in a
    folder of the session ($LAUNCHPAD_RUN_DIR), not in ~/.launchpad."""
    yield from _variable_naming_a_session_folder(tmp_path_factory, "LAUNCHPAD_RUN_DIR", "runs")


@pytest.fixture(autouse=True, scope="session")
def node_output_files_of_the_session(tmp_path_factory):
    """terminal='output_to_files' writes in a folder of the session ($LAUNCHPAD_LOGGING_DIR),
    not in /tmp/launchpad_out (a test that reads the files gives its own)."""
    yield from _variable_naming_a_session_folder(tmp_path_factory, "LAUNCHPAD_LOGGING_DIR",
                                                 "launchpad_out")


@pytest.fixture
def no_leaked_threads():
    """Fails the test if a thread it started is still alive shortly after it ends."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 10
    while True:  # (a thread ending may start another, e.g. a server's last event taken)
        # (enumerate() also lists threads whose start is under way)
        alive = [t for t in set(threading.enumerate()) - before if t.is_alive()]
        if not alive or time.monotonic() >= deadline:
            break
        for thread in alive:
            thread.join(max(0.0, deadline - time.monotonic()))
    assert not alive, f"threads left behind: {[t.name for t in alive]}"


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


