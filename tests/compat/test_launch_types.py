"""Launchpad's launch types and lp.launch's options: the XManager ones are named and refused
with what runs such a program here; XManager's options are accepted and ignored."""

from __future__ import annotations

import pytest

import launchpad as lp


def _program() -> lp.Program:
    program = lp.Program("p")
    program.add_node(lp.PyNode(int), label="noop")
    return program


@pytest.mark.parametrize("launch_type, instead", [
    ("local_docker", "launch_type='local_mp'"), (lp.LaunchType.VERTEX_AI, "'kubernetes'")])
def test_xmanagers_launch_types_are_refused_naming_what_runs_them_here(launch_type, instead):
    with pytest.raises(ValueError, match="cannot run here") as refused:
        lp.launch(_program(), launch_type=launch_type,
                  xm_resources={"noop": lp.DockerConfig("/code", "requirements.txt")})
    assert instead in str(refused.value) and "XManager" in str(refused.value)


def test_an_unknown_launch_type_is_refused_listing_those_that_run():
    with pytest.raises(ValueError, match="Unknown launch_type 'nowhere'.*local_mp"):
        lp.launch(_program(), launch_type="nowhere")


def test_xmanagers_controller_requirements_are_accepted_and_ignored(no_leaked_threads):
    controller = lp.launch(_program(), launch_type="local_mt",
                           controller_xm_requirements={"cpu": 1})
    assert controller.wait(timeout=30)


def test_launchpads_launch_functions_at_their_paths_launch_under_their_types(
        no_leaked_threads, no_leaked_processes, request):
    from launchpad.launch.local_multi_processing import launch as local_mp
    from launchpad.launch.local_multi_threading import launch as local_mt
    from launchpad.launch.test_multi_processing import launch as test_mp
    from launchpad.launch.test_multi_threading import launch as test_mt
    launched = [local_mt.launch(_program()), local_mp.launch(_program()),
                test_mt.launch(_program(), request), test_mp.launch(_program(), request)]
    assert [c.launch_type for c in launched] == ["local_mt", "local_mp", "test_mt", "test_mp"]
    for controller in launched:
        assert controller.wait(timeout=60)


def test_launchpads_window_terminals_stand_for_the_current_one(no_leaked_processes, capfd):
    from launchpad.launch.local_multi_processing import launch as local_mp
    assert local_mp.launch(_program(), terminal="xterm").wait(timeout=60)
