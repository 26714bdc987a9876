"""`lp.ProgramController`: the one type a user's code and the CLI hold of a launched program,
whatever the launch type - the local Controller, every detached proxy, a dry run's."""

from __future__ import annotations

import inspect

import pytest

import launchpad as lp
from launchpad.launch.kubernetes.launcher import KubernetesController
from launchpad.launch.ray.detached import RayRemoteController
from launchpad.launch.runtime.dry_run import DryRun
from launchpad.launch.slurm.detached import SlurmRemoteController

_DATA = {"run_id", "program_name", "stop_reason", "failure"}
_METHODS = sorted(name for name, member in vars(lp.ProgramController).items()
                  if callable(member) and not name.startswith("_")
                  or name in ("__enter__", "__exit__"))


def _program() -> lp.Program:
    program = lp.Program("held")
    program.add_node(lp.PyNode(int), label="noop")
    return program


@pytest.mark.parametrize("kind", [lp.Controller, SlurmRemoteController, RayRemoteController,
                                  KubernetesController, DryRun])
def test_every_kind_of_controller_has_the_protocols_methods(kind):
    assert _METHODS and "wait" in _METHODS
    for name in _METHODS:
        assert callable(getattr(kind, name, None)), f"{kind.__name__} has no {name}()"
    # One wait signature: Launchpad's arguments, then timeout= (keyword only).
    expected = inspect.signature(lp.ProgramController.wait).parameters
    parameters = inspect.signature(kind.wait).parameters
    assert [(p.name, p.kind, p.default) for p in parameters.values()] == [
        (p.name, p.kind, p.default) for p in expected.values()]


def test_a_local_controller_and_a_dry_run_are_program_controllers():
    controller = lp.launch(_program(), launch_type="local_mt")
    try:
        assert isinstance(controller, lp.ProgramController)
        assert _DATA <= set(dir(controller))
    finally:
        assert controller.stop_and_wait()
    dry = lp.launch(_program(), launch_type="local_mp", dry_run=True)
    assert isinstance(dry, lp.ProgramController) and dry.wait(timeout=1)
    assert not isinstance(object(), lp.ProgramController)
