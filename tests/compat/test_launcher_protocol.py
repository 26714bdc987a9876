"""What custom launchers and node types built on Launchpad's internals call (TLaunch's
Kubernetes and SSH launchers, corax): a node's launch context, `Handle.connect`/`transform`,
`bind_addresses`, `to_executables`, `context.set_context`, `Deferred._apply_to_args`, and
the attributes Launchpad's node types had. docs/migrating.md says which differ, and why."""

from __future__ import annotations

import threading

import pytest

import launchpad as lp
from launchpad.nodes import base


class _Worker:
    def step(self) -> int:
        return 1


def _noop(*args) -> None:
    del args


def test_a_custom_launchers_loop_over_nodes_and_handles_runs():
    program = lp.Program("p")
    worker = program.add_node(lp.CourierNode(_Worker), label="worker")
    program.add_node(lp.PyNode(_noop, worker), label="user")
    for label, nodes in program.groups.items():  # TLaunch's launch_kubernetes, as written
        for node in nodes:
            node._initialize_context(lp.LaunchType.KUBERNETES, launch_config=None)
            for handle in node._input_handles:
                handle.connect(node, label)
            node.bind_addresses()
    (user,) = program.groups["user"]
    assert user.launch_context.launch_type == lp.LaunchType.KUBERNETES
    assert user.launch_context.launch_config is None
    assert callable(user.launch_context.program_stopper)
    assert worker.transform(["executable"]) == ["executable"]
    with pytest.raises(NotImplementedError, match=r"run node.run\(\).*group 'user'"):
        user.to_executables([user], "user", user.launch_context)


def test_a_launch_context_is_uninitialised_until_a_launch():
    node = lp.PyNode(_noop)
    with pytest.raises(RuntimeError, match="not yet initialized"):
        _ = node.launch_context.launch_type


class _RecordingHandle(base.Handle):
    connected: list = []

    def connect(self, node, label):
        self.connected.append((node.name, label))

    def dereference(self):
        return "a client"


class _Recorded(lp.PyNode):
    def create_handle(self):
        return _RecordingHandle(self)


def test_a_launch_tells_each_input_handle_of_the_node_holding_it(no_leaked_threads, request):
    _RecordingHandle.connected.clear()
    program = lp.Program("p")
    recorded = program.add_node(_Recorded(_noop), label="recorded")
    program.add_node(lp.PyNode(_noop, recorded), label="holder")
    controller = lp.launch(program, launch_type="test_mt", test_case=request)
    assert controller.wait(timeout=60)
    assert _RecordingHandle.connected == [("holder/0", "holder")]
    (holder,) = program.groups["holder"]
    assert holder.launch_context.launch_type == lp.LaunchType.TEST_MULTI_THREADING


def test_set_context_gives_this_thread_the_launch_context_it_set():
    given = lp.context.LaunchContext()
    given.initialize(lp.LaunchType.LOCAL_MULTI_PROCESSING, {"some": "config"})
    seen = []

    def in_a_thread():
        lp.context.set_context(given)
        seen.append(lp.context.get_context())

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    assert seen == [given] and seen[0].launch_config == {"some": "config"}
    with pytest.raises(lp.context.NoContextError):  # only that thread's
        lp.context.get_context()


def test_a_deferreds_args_are_walked_by_apply_to_args():
    program = lp.Program("p")
    first = program.add_node(lp.CourierNode(_Worker), label="first")
    second = program.add_node(lp.CourierNode(_Worker), label="second")
    deferred = lp.Deferred(_noop, first, settings={"peer": second, "n": 3})
    found = []
    deferred._apply_to_args(lambda handle: found.append(handle))  # TLaunch's handle walk
    assert found == [first, second]
    handles = []
    base.extract_handles(deferred, handles)
    assert handles == [first, second]


def test_the_attributes_launchpads_node_types_had():
    node = lp.CourierNode(_Worker, courier_client_kwargs={"call_timeout": 1})
    assert node._server is None  # set while it runs
    assert node.create_handle()._kwargs == {"call_timeout": 1}
    node._collect_input_handles()  # Launchpad's configure() called it; nothing to collect
    assert node._should_run and node._courier_kwargs == {}
