"""`wait()` as Launchpad's worker manager's: for some groups only, for the first node to
end, without raising; and its failures, RuntimeErrors of the node's own type."""

from __future__ import annotations

import pytest

import launchpad as lp
from tests.launch.helpers import TIMEOUT


def _block():
    lp.wait_for_stop()


def _fail():
    raise KeyError("missing part")


def _two_groups(first=int, second=_block) -> lp.Program:
    program = lp.Program("p")
    with program.group("main"):
        program.add_node(lp.PyNode(first))
        program.add_node(lp.PyNode(first))
    with program.group("daemon"):
        program.add_node(lp.PyNode(second))
    return program


def test_waiting_for_some_groups_returns_once_their_nodes_have_ended(launch):
    controller = launch(_two_groups())
    assert controller.wait(["main"], timeout=TIMEOUT)
    assert controller.wait("main", timeout=TIMEOUT)  # one label alone
    assert controller.exit_codes()["daemon/0"] is None  # the other group runs on
    assert not controller.wait(timeout=0.2)


def test_return_on_first_completed_returns_once_one_node_has_ended(launch):
    program = lp.Program("p")
    program.add_node(lp.PyNode(_block), label="daemon")
    program.add_node(lp.PyNode(int), label="quick")
    controller = launch(program)
    assert controller.wait(return_on_first_completed=True, timeout=TIMEOUT)
    assert controller.exit_codes() == {"daemon/0": None, "quick/0": 0}


def test_a_failure_elsewhere_ends_a_wait_for_some_groups_at_once(launch_failing):
    controller = launch_failing(_two_groups(first=_block, second=_fail))
    with pytest.raises(lp.NodeFailedError, match="daemon/0"):
        controller.wait(["main"], timeout=TIMEOUT)


def test_without_raise_error_a_failed_program_is_waited_for_and_the_failure_kept(
        launch_failing):
    program = lp.Program("p")
    program.add_node(lp.PyNode(_fail), label="fails")
    program.add_node(lp.PyNode(_block), label="daemon")
    controller = launch_failing(program)
    assert controller.wait(raise_error=False, timeout=TIMEOUT)
    assert controller.exit_codes()["daemon/0"] is not None  # the failure stopped it
    with pytest.raises(lp.NodeFailedError):
        controller.wait()


def test_a_nodes_failure_is_a_runtime_error_and_of_the_nodes_own_type(launch_failing):
    program = lp.Program("p")
    program.add_node(lp.PyNode(_fail), label="fails")
    controller = launch_failing(program)
    with pytest.raises(KeyError, match="missing part") as raised:
        controller.wait(timeout=TIMEOUT)
    assert isinstance(raised.value, lp.NodeFailedError)
    assert isinstance(raised.value, RuntimeError)
    assert raised.value.node == "fails/0"


def test_a_number_first_is_refused_naming_the_timeout_keyword(launch):
    """Launchpad's first argument is labels_to_wait_for; the timeout is a keyword of every
    controller's wait (one signature), and a number in first place says so."""
    program = lp.Program("p")
    program.add_node(lp.PyNode(_block), label="daemon")
    controller = launch(program)
    with pytest.raises(TypeError, match=r"wait\(0\.1\): the timeout is a keyword, "
                                        r"wait\(timeout=0\.1\)"):
        controller.wait(0.1)
    assert controller.wait(timeout=0.1) is False


@pytest.mark.parametrize("labels, error, match", [
    (["nowhere"], ValueError, "has no group nowhere; its groups: main, daemon"),
    ({"main": 1}, TypeError, "list of group labels")])
def test_labels_that_name_no_group_are_refused_naming_the_groups(launch, labels, error, match):
    controller = launch(_two_groups())
    with pytest.raises(error, match=match):
        controller.wait(labels)


def test_launchpads_view_of_the_workers_groups_them_by_label(launch):
    program = _two_groups()
    controller = launch(program)
    assert controller.wait(["main"], timeout=TIMEOUT)
    workers = controller._active_workers
    assert sorted(workers) == ["daemon", "main"]
    assert [w.wait() for w in workers["main"]] == [0, 0]
    assert workers["daemon"][0].poll() is None
    controller._kill()
    assert controller.wait(timeout=TIMEOUT)


def test_programs_launched_together_are_waited_for_and_stopped_as_one(no_leaked_threads):
    programs = [lp.Program(name) for name in ("a", "b")]
    for program in programs:
        program.add_node(lp.PyNode(_block), label="daemon")
    launched = lp.launch(programs, launch_type="local_mt")
    assert [c.program_name for c in launched] == ["a", "b"]
    assert launched.wait(timeout=0.1) is False
    assert launched.stop_and_wait()
