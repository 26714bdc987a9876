"""Fixtures of the CLI tests: a run registry of the test's own, and programs launched here."""

from __future__ import annotations

import pytest

import launchpad as lp
from tests.cli import helpers


@pytest.fixture
def run_dir(monkeypatch, tmp_path) -> str:
    """The test's own run registry (its scripts and commands inherit it)."""
    monkeypatch.setenv("LAUNCHPAD_RUN_DIR", str(tmp_path / "runs"))
    return str(tmp_path / "runs")


@pytest.fixture
def launch_here(run_dir):
    """`launch_here(name)` launches a local_mt program of one waiting node here (recorded, as
    every local launch is); all are stopped after."""
    controllers = []

    def launch(name: str):
        program = lp.Program(name)
        program.add_node(lp.PyNode(helpers.waits), label="waiter")
        controllers.append(lp.launch(program, launch_type="local_mt"))
        return controllers[-1]

    yield launch
    for controller in controllers:
        controller.stop()
    for controller in controllers:
        assert controller.wait(timeout=helpers.TIMEOUT)
