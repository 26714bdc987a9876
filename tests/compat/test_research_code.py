"""The launching patterns of research code written for Launchpad by others (docs/migrating.md,
"Judged by code from outside DeepMind"), each as that code writes it, under every local launch
type: magi's and Mava's agent tests, magi's colocated learner and replay, google iris's
coordinator test, affordances_option_models' program stopper, Mava's resources and its kill
of the launcher's children."""

from __future__ import annotations

import os

import pytest

import launchpad as lp
from tests.launch.conftest import _launcher, _stop_all
from tests.launch.helpers import TIMEOUT


class _Learner:
    def __init__(self):
        self._steps = 0

    def step(self) -> int:
        self._steps += 1
        return self._steps

    def run(self) -> None:
        raise AssertionError("a learner whose run was disabled ran")


def test_a_learner_with_run_disabled_is_stepped_by_the_test_through_a_new_handle(launch):
    program = lp.Program("agent")  # magi's agent_distributed_test, Mava's system tests
    with program.group("learner"):
        program.add_node(lp.CourierNode(_Learner))
    (learner_node,) = program.groups["learner"]
    learner_node.disable_run()
    launch(program)
    learner = learner_node.create_handle().dereference()
    assert [learner.step(), learner.step()] == [1, 2]


def _act(learner, box) -> None:
    box.put(learner.step())


def _replay() -> list:
    return []


def test_a_handle_made_before_its_node_joins_a_colocation_reaches_it(launch, box):
    results = box()
    program = lp.Program("agent")  # magi's distributed_layout
    learner_node = lp.CourierNode(_Learner)
    learner_node.disable_run()
    learner = learner_node.create_handle()
    replay_node = lp.CourierNode(_replay)
    with program.group("learner"):
        program.add_node(lp.MultiThreadingColocation([learner_node, replay_node]))
    with program.group("actor"):
        program.add_node(lp.PyNode(_act, learner, results))
    launch(program)
    assert results.get() == 1


class _Worker:
    def evaluate(self, x: int) -> int:
        return x * x


class _Coordinator:
    def __init__(self, workers):
        self._workers = workers

    def run_round(self, x: int) -> list[int]:
        return [worker.evaluate(x) for worker in self._workers]

    def run(self) -> None:
        lp.wait_for_stop()


def test_a_nodes_object_built_in_the_test_calls_the_launched_program(launch):
    program = lp.Program("coordinated")  # google iris's coordinator_test
    with program.group("worker"):
        workers = [program.add_node(lp.CourierNode(_Worker)) for _ in range(2)]
    coordinator_node = lp.CourierNode(_Coordinator, workers=workers)
    program.add_node(coordinator_node, label="coordinator")
    launch(program)
    coordinator = coordinator_node._construct_instance()
    assert coordinator.run_round(3) == [9, 9]


def _finish(program_stopper) -> None:
    program_stopper(mark_as_completed=True)
    lp.wait_for_stop()


def test_a_program_stopper_made_by_the_launcher_stops_the_program_from_a_node(launch):
    program_stopper = lp.make_program_stopper(launch.launch_type)  # affordances_option_models
    program = lp.Program("options")
    program.add_node(lp.PyNode(_finish, program_stopper), label="learner")
    controller = launch(program)
    assert controller.wait(timeout=TIMEOUT)


def test_local_resources_built_twice_compare_equal():
    built = [{"actor": lp.PythonProcess(env={"CUDA_VISIBLE_DEVICES": "-1"})} for _ in range(2)]
    assert built[0] == built[1]  # Mava's lp_utils_test compares them
    assert lp.PythonProcess(args={"seed": 1}) != lp.PythonProcess(args={"seed": 2})


def _serve_forever() -> None:
    lp.wait_for_stop()


def _parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rpartition(")")[2].split()[1])


@pytest.fixture(params=["local_mp", "test_mp"])
def launch_processes(request, no_leaked_threads, no_leaked_processes):
    """`launch` under the launch types whose nodes are processes."""
    launch, controllers = _launcher(request.param, request)
    yield launch
    _stop_all(controllers)


def test_node_processes_are_descendants_of_the_launching_process(launch_processes):
    launch = launch_processes
    program = lp.Program("p")  # Mava kills psutil.Process(os.getpid()).children(recursive=True)
    program.add_node(lp.PyNode(_serve_forever), label="node")
    pids = launch(program).pids()
    assert list(pids) == ["node/0"]
    for pid in pids.values():
        chain = [pid]
        while chain[-1] > 1 and chain[-1] != os.getpid():
            chain.append(_parent_of(chain[-1]))
        assert chain[-1] == os.getpid(), chain
