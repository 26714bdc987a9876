"""Nodes that import a heavy library are forked from a process that imported it already
(`Node.heavy_imports`), one such process per set of imports, on this host and on each Slurm
host; other nodes are forked from the core's and import nothing they do not use."""

import sys

import pytest

import launchpad as lp

# A module nothing in launchpad imports, standing in for a heavy one such as Reverb.
STAND_IN = "wave"


class _NeedsStandIn(lp.PyNode):
    own_imports = (STAND_IN,)


def _report(name, box):
    box.put((name, STAND_IN in sys.modules))


pytestmark = pytest.mark.parametrize("launch_processes", ["local_mp", "slurm"], indirect=True)


def test_a_node_declaring_a_heavy_import_starts_with_it_imported_and_others_without(
        launch_processes, box):
    results = box()
    program = lp.Program("imports")
    program.add_node(_NeedsStandIn(_report, "declares", results), label="declares")
    program.add_node(lp.PyNode(_report, "plain", results), label="plain")
    launch_processes(program)
    assert dict(results.get() for _ in range(2)) == {"declares": True, "plain": False}


def test_a_node_setting_a_variable_tensorflow_reads_at_import_imports_for_itself(
        launch_processes, box):
    results = box()
    program = lp.Program("imports")
    program.add_node(_NeedsStandIn(_report, "declares", results), label="declares")
    launch_processes(program, local_resources={
        "declares": lp.PythonProcess(env={"TF_CPP_MIN_LOG_LEVEL": "3"})})
    assert results.get() == ("declares", False)


def test_a_thread_colocation_starts_with_the_imports_of_the_nodes_it_holds(
        launch_processes, box):
    results = box()
    program = lp.Program("imports")
    program.add_node(lp.MultiThreadingColocation([
        lp.PyNode(_report, "beside", results), _NeedsStandIn(_report, "declares", results)]),
        label="colocation")
    launch_processes(program)
    assert dict(results.get() for _ in range(2)) == {"beside": True, "declares": True}
