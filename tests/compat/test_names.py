"""Every name of Launchpad's `launchpad` and its deep module paths is here and is ours: the
same objects at Launchpad's paths as at lp.* (test_signatures.py checks each signature
against Launchpad's sources)."""

from __future__ import annotations

import importlib
import pickle

import pytest

import launchpad as lp

# Launchpad's path -> name -> the lp.* object it must be.
PATHS = {
    "launchpad.context": {"LaunchType": lp.LaunchType, "is_local_launch": lp.is_local_launch,
                          "is_local_launch_or_test": lp.is_local_launch_or_test},
    "launchpad.flags": {"LAUNCH_TYPE": lp.LAUNCH_TYPE},
    "launchpad.program": {"Program": lp.Program, "make_program": lp.make_program},
    "launchpad.address": {"Address": lp.Address,
                          "AbstractAddressBuilder": lp.AbstractAddressBuilder,
                          "SimpleLocalAddressBuilder": lp.SimpleLocalAddressBuilder,
                          "get_port_from_address": lp.get_port_from_address},
    "launchpad.nodes.base": {"Node": lp.Node, "Handle": lp.Handle},
    "launchpad.nodes.dereference": {"Deferred": lp.Deferred},
    "launchpad.nodes.python.node": {"PyNode": lp.PyNode, "PyClassNode": lp.PyClassNode},
    "launchpad.nodes.python.local_multi_processing": {"PythonProcess": lp.PythonProcess},
    "launchpad.nodes.python.xm_docker": {"DockerConfig": lp.DockerConfig},
    "launchpad.nodes.courier.node": {"CourierNode": lp.CourierNode,
                                     "CourierHandle": lp.CourierHandle,
                                     "CourierClient": lp.CourierClient},
    "launchpad.nodes.courier.courier_utils": {"batched_handler": lp.batched_handler},
    "launchpad.nodes.reverb.node": {"ReverbNode": lp.ReverbNode},
    "launchpad.nodes.multi_threading_colocation.node": {
        "MultiThreadingColocation": lp.MultiThreadingColocation},
    "launchpad.nodes.multi_processing_colocation.node": {
        "MultiProcessingColocation": lp.MultiProcessingColocation},
    "launchpad.launch.launch": {"launch": lp.launch},
    "launchpad.program_stopper.program_stopper": {
        "make_program_stopper": lp.make_program_stopper},
    "launchpad.stop_program.stop": {"stop": lp.stop},
    **{f"launchpad.launch.{module}": {
        "wait_for_stop": lp.wait_for_stop, "stop_event": lp.stop_event,
        "register_stop_handler": lp.register_stop_handler,
        "unregister_stop_handler": lp.unregister_stop_handler}
       for module in ("worker_manager", "worker_manager_v2", "worker_manager_migration")},
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_each_launchpad_path_holds_our_object_under_its_name(path):
    module = importlib.import_module(path)
    for name, ours in PATHS[path].items():
        assert getattr(module, name) is ours, f"{path}.{name}"


def test_launch_types_are_launchpads_values_and_ours():
    assert lp.context.LaunchType is lp.LaunchType
    assert {t.value for t in lp.LaunchType} >= {"local_mt", "local_mp", "test_mt", "test_mp",
                                                "local_docker", "vertex_ai"}
    assert lp.LaunchType("local_mp") is lp.LaunchType.LOCAL_MULTI_PROCESSING


@pytest.mark.parametrize("launch_type, local, local_or_test", [
    ("local_mt", True, True), ("local_mp", True, True), ("test_mt", False, True),
    ("test_mp", False, True), ("vertex_ai", False, False), ("slurm", False, False),
    (lp.LaunchType.LOCAL_MULTI_PROCESSING, True, True)])
def test_is_local_launch_tells_local_and_test_launch_types(launch_type, local, local_or_test):
    assert lp.is_local_launch(launch_type) is local
    assert lp.is_local_launch_or_test(launch_type) is local_or_test


def test_is_local_launch_refuses_what_is_no_launch_type():
    with pytest.raises(ValueError, match="nowhere"):
        lp.is_local_launch("nowhere")


def test_current_group_is_the_open_groups_label_and_an_error_outside_one():
    program = lp.Program("p")
    with program.group("actor"):
        assert program.current_group == "actor"
    with pytest.raises(ValueError, match="only available in group context"):
        program.current_group  # noqa: B018 - the property is what is tested


def test_the_courier_client_class_is_what_a_courier_handle_becomes(box):
    from launchpad.courier.client import Client
    assert lp.CourierClient is Client
    import courier
    assert issubclass(courier.Client, lp.CourierClient)


def test_a_program_stopper_pickles_and_names_its_launch_type():
    stopper = lp.make_program_stopper("local_mp")
    assert pickle.loads(pickle.dumps(stopper)).launch_type is lp.LaunchType.LOCAL_MULTI_PROCESSING
    with pytest.raises(ValueError):
        lp.make_program_stopper("nowhere")


def test_lazy_loader_keeps_launchpads_with_block_whose_imports_bind_as_usual():
    with lp.lazy_loader.LazyImports(__name__, False):
        from launchpad.nodes.reverb.node import ReverbNode
    assert ReverbNode is lp.ReverbNode
