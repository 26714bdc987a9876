"""Colocation nodes under every launch type: nodes sharing a process (threads) or a node
(child processes), nested, failing and retried."""

import os

import pytest

import launchpad as lp
from tests.launch.helpers import TIMEOUT


class Where:
    def __init__(self, name):
        self._name = name

    def where(self):
        return self._name, os.getpid()


def _pids(handles):
    return {name: pid for name, pid in (h.dereference().where() for h in handles)}


def test_multithreading_colocation_serves_its_nodes_from_one_process(launch):
    program = lp.Program("threads")
    a, b = lp.CourierNode(Where, "a"), lp.CourierNode(Where, "b")
    colocation = lp.MultiThreadingColocation([a, b])
    handles = [a.create_handle(), b.create_handle()]
    program.add_node(colocation, label="both")
    launch(program)
    pids = _pids(handles)
    assert set(pids) == {"a", "b"} and pids["a"] == pids["b"]
    assert handles[1].node_name == "both/0/1"


def test_multiprocessing_colocation_runs_each_node_in_its_own_process(launch):
    program = lp.Program("processes")
    colocation = lp.MultiProcessingColocation([])
    handles = [colocation.add_node(lp.CourierNode(Where, name)) for name in "ab"]
    program.add_node(colocation, label="both")
    launch(program)
    pids = _pids(handles)
    assert len(set(pids.values())) == 2 and os.getpid() not in pids.values()


def test_colocations_nest(launch):
    program = lp.Program("nested")
    inner = lp.MultiThreadingColocation([])
    threads = [inner.add_node(lp.CourierNode(Where, name)) for name in ("t1", "t2")]
    outer = lp.MultiProcessingColocation([inner])
    alone = outer.add_node(lp.CourierNode(Where, "p"))
    program.add_node(outer, label="outer")
    launch(program)
    pids = _pids(threads + [alone])
    assert pids["t1"] == pids["t2"] != pids["p"]
    assert threads[0].node_name == "outer/0/0/0"


def _fail():
    raise ValueError("inner boom")


@pytest.mark.parametrize("colocation", [lp.MultiThreadingColocation,
                                        lp.MultiProcessingColocation])
def test_a_failing_colocated_node_fails_the_program_naming_it(colocation, launch_local):
    program = lp.Program("failing")
    program.add_node(colocation([lp.CourierNode(Where, "ok"), lp.PyNode(_fail)]), label="co")
    controller = launch_local(program)
    with pytest.raises(lp.NodeFailedError, match="co/0") as info:
        controller.wait(timeout=TIMEOUT)
    assert "colocated node co/0/1 failed" in info.value.reason
    assert "ValueError: inner boom" in str(info.value)


def _fail_first_time(marker, results):
    if not os.path.exists(marker):
        open(marker, "w").close()
        raise RuntimeError("first attempt fails")
    results.put("second attempt")


def test_multiprocessing_colocation_retries_failed_nodes(launch, box, tmp_path):
    results = box()
    program = lp.Program("retried")
    node = lp.PyNode(_fail_first_time, str(tmp_path / "tried"), results)
    program.add_node(lp.MultiProcessingColocation([node], num_retries_on_failure=1),
                     label="co")
    assert launch(program).wait(timeout=TIMEOUT)
    assert results.get() == "second attempt"


def _put(results, value):
    results.put(value)


def test_multithreading_colocation_can_end_with_its_first_node(launch, box):
    results = box()
    program = lp.Program("first")
    quick = lp.PyNode(_put, results, "quick")
    serving = lp.CourierNode(Where, "serves until the program stops")
    program.add_node(lp.MultiThreadingColocation([quick, serving],
                                                 return_on_first_completed=True), label="co")
    assert launch(program).wait(timeout=TIMEOUT)
    assert results.get() == "quick"


def test_colocation_misuse_is_named():
    node = lp.PyNode(int)
    program = lp.Program("p")
    program.add_node(node, label="added")
    with pytest.raises(ValueError, match="already in a program"):
        lp.MultiThreadingColocation([node])
    with pytest.raises(TypeError, match="holds launchpad nodes"):
        lp.MultiProcessingColocation([int])
    colocation = lp.MultiThreadingColocation([])
    program.add_node(colocation, label="empty")
    with pytest.raises(ValueError, match="once it is in a program"):
        colocation.add_node(lp.PyNode(int))
