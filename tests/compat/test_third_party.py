"""Patterns of code written for Launchpad outside DeepMind, each run unchanged under every
local launch type: a served method named like a client's own (affordances_option_models'
task queue serves `close`), `local_resources` naming groups a program lacks (magi), a node's
`_created_handles` (Mava's launcher test), and a CourierNode subclass serving through
Launchpad's internals from a run() of its own (TLaunch). docs/migrating.md lists them all."""

from __future__ import annotations

import logging

import pytest

import launchpad as lp
from launchpad import address as lp_address
from launchpad.nodes.courier import courier_utils
from tests.launch.helpers import TIMEOUT


class _TaskQueue:
    """A queue of tasks that its producer closes remotely (affordances_option_models)."""

    def __init__(self):
        self._tasks: list[int] = []
        self._closed = False

    def put(self, task: int) -> None:
        self._tasks.append(task)

    def close(self) -> None:
        self._closed = True

    def call(self, value):  # as named as one of our client's operations once was
        return ("served call", value)

    def state(self) -> tuple[list[int], bool]:
        return self._tasks, self._closed


def _produce(queue, box) -> None:
    queue.put(1)
    closed = queue.close()  # the server's close: the client stays usable
    queue.put(2)
    box.put((closed, queue.call(3), queue.futures.close().result(TIMEOUT), queue.state()))


def test_a_served_close_is_called_on_the_server_through_a_handle(launch, box):
    results = box()
    program = lp.Program("tasks")
    queue = program.add_node(lp.CourierNode(_TaskQueue), label="queue")
    program.add_node(lp.PyNode(_produce, queue, results), label="producer")
    launch(program)
    assert results.get() == (None, ("served call", 3), None, ([1, 2], True))
    assert queue.dereference().state() == ([1, 2], True)  # from the launching process too


def _noop() -> None:
    return None


def test_local_resources_for_groups_the_program_lacks_are_ignored_with_a_log_line(
        launch, caplog):
    program = lp.Program("agent")
    with program.group("actor"):
        program.add_node(lp.PyNode(_noop))
    with program.group("learner"):
        program.add_node(lp.PyNode(_noop))
    resources = {"actor": lp.PythonProcess(env={"SOMETHING": "1"}), "learner": [],
                 "replay": lp.PythonProcess(), "evaluator": None}  # magi's lp_main shape
    with caplog.at_level(logging.WARNING):
        controller = launch(program, local_resources=resources)
    assert controller.wait(timeout=TIMEOUT)
    named = [r.getMessage() for r in caplog.records if "local_resources" in r.getMessage()]
    assert len(named) == 1 and "['evaluator', 'replay']" in named[0] and "ignored" in named[0]


class _Learner:
    def step(self) -> int:
        return 1


def _replay_tables():
    import reverb
    return [reverb.Table.queue("items", 10)]


def test_created_handles_hold_the_handle_add_node_returned():
    program = lp.Program("p")
    nodes = [lp.CourierNode(_Learner), lp.PyNode(_noop), lp.PyClassNode(_Learner),
             lp.ReverbNode(_replay_tables)]
    for node in nodes:
        handle = program.add_node(node, label=type(node).__name__)
        assert node._created_handles == [handle] and node._created_handles[0] is handle
    colocation = lp.MultiThreadingColocation([lp.PyNode(_noop)])
    assert colocation._created_handles == [program.add_node(colocation, label="both")]


def test_a_node_type_tracking_its_handles_itself_tracks_each_once():
    class _Tracking(lp.CourierNode):  # Launchpad's node types call _track_handle themselves
        def create_handle(self):
            return self._track_handle(super().create_handle())

    node = _Tracking(_Learner)
    handle = lp.Program("p").add_node(node, label="tracked")
    assert node._created_handles == [handle]


class _LaunchpadStyleCourierNode(lp.CourierNode):
    """TLaunch's CourierNode: run() of its own, serving through Launchpad's internals."""

    def run(self) -> None:
        instance = self._construct_instance()
        self._server = courier_utils.make_courier_server(
            instance, port=lp_address.get_port_from_address(self._address.resolve()),
            **self._courier_kwargs)
        if hasattr(instance, "set_courier_server"):
            instance.set_courier_server(self._server)
            if hasattr(instance, "run") and self._should_run:
                instance.run()
        else:
            self._server.Start()
            if hasattr(instance, "run") and self._should_run:
                instance.run()
            else:
                lp.wait_for_stop()
            self._server.Stop()
            self._server.Join()


def _ask(learner, box) -> None:
    box.put(learner.step())


def test_a_courier_node_subclass_with_its_own_run_serves_through_launchpads_internals(
        launch, box):
    results = box()
    program = lp.Program("p")
    learner = program.add_node(_LaunchpadStyleCourierNode(_Learner), label="learner")
    program.add_node(lp.PyNode(_ask, learner, results), label="asker")
    launch(program)
    assert results.get() == 1
    assert learner.dereference().step() == 1


class _CallsOurRun(lp.CourierNode):
    """A subclass whose run() does something first, then runs CourierNode's."""

    def run(self) -> None:
        self._address.resolve()  # registered before its run: it may look
        super().run()


def test_a_subclass_run_calling_courier_nodes_serves_on_the_registered_address(launch):
    program = lp.Program("p")
    learner = program.add_node(_CallsOurRun(_Learner), label="learner")
    launch(program)
    assert learner.dereference().step() == 1


@pytest.mark.parametrize("node_type", [lp.CourierNode, lp.ReverbNode])
def test_our_nodes_register_their_own_server_address(node_type):
    node = node_type(_Learner) if node_type is lp.CourierNode else node_type(_replay_tables)
    assert node._address.registered_by_node
    assert not _CallsOurRun(_Learner)._address.registered_by_node


def test_an_address_bound_before_the_launch_resolves_through_the_launch(launch, box):
    from launchpad.launch.test_multi_threading import address_builder
    results = box()
    program = lp.Program("p")
    learner_node = lp.CourierNode(_Learner)
    learner = program.add_node(learner_node, label="learner")
    address_builder.bind_addresses([learner_node])  # Mava's integration tests, then launch
    program.add_node(lp.PyNode(_ask, learner, results), label="asker")
    launch(program)
    assert results.get() == 1
    assert learner.dereference().step() == 1
    assert not learner_node.courier_address.bound


def _report_launch_config(box) -> None:
    config = lp.context.get_context().launch_config
    box.put(None if config is None else config.env)


def test_a_nodes_launch_config_is_its_groups_local_resources_entry_under_processes(
        launch, box):
    results = box()
    program = lp.Program("p")
    program.add_node(lp.PyNode(_report_launch_config, results), label="configured")
    launch(program, local_resources={"configured": lp.PythonProcess(env={"SEEN": "1"})})
    processes = launch.launch_type.endswith("_mp")  # as Launchpad: None under threads
    assert results.get() == ({"SEEN": "1"} if processes else None)
