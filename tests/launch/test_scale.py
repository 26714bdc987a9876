"""A group that grows and shrinks while its program runs (`Controller.scale`): new nodes are
made as the group's first was, with their own index and the same handles; removed ones stop
gracefully (their stop handlers run), from the highest index down, and the rest runs on."""

import threading

import pytest

import launchpad as lp
from launchpad import context
from tests.launch.helpers import TIMEOUT

# The launchers that start nodes of a running program.
LOCAL = pytest.mark.parametrize("launch_each_engine", ["local_mt", "local_mp"], indirect=True)


class Worker:
    """Says which node it is and what it was given; says when it is stopped."""

    def __init__(self, given, box):
        self._given = given
        self._index = context.current().index
        lp.register_stop_handler(lambda: box.put(("stopped", self._index)))

    def whoami(self) -> tuple:
        return self._index, self._given


class Learner:
    """Holds the worker group's handle; says who its members are once there are `count`."""

    def __init__(self, workers):
        self._workers = workers
        self._changed = threading.Condition()
        workers.on_change(self._note)

    def _note(self, names):
        with self._changed:
            self._changed.notify_all()

    def members_once(self, count):
        with self._changed:
            self._changed.wait_for(lambda: len(self._workers) == count, TIMEOUT)
        return self._workers.names

    def ask_all(self):
        return [index for index, _ in self._workers.call.whoami()]


def _program(box, size=2):
    program = lp.Program("elastic")
    with program.group("worker"):
        for _ in range(size):
            program.add_node(lp.CourierNode(Worker, "shared", box))
    return program


def _ask(program, index):
    handle = program.groups["worker"][index].create_handle()
    return handle.dereference().futures.whoami().result(timeout=TIMEOUT)


@LOCAL
def test_a_group_grows_with_nodes_made_as_its_first(launch_each_engine, box):
    results = box()
    program = _program(results)
    controller = launch_each_engine(program)
    assert controller.scale("worker", 4) == ["worker/2", "worker/3"]
    assert [_ask(program, i) for i in range(4)] == [(i, "shared") for i in range(4)]
    assert sorted(n.name for n in controller.status().nodes if n.name.startswith("worker")) \
        == ["worker/0", "worker/1", "worker/2", "worker/3"]


@LOCAL
def test_a_group_shrinks_from_its_highest_index_and_the_rest_runs_on(launch_each_engine, box):
    results = box()
    program = _program(results, size=4)
    controller = launch_each_engine(program)
    assert [_ask(program, i)[0] for i in range(4)] == [0, 1, 2, 3]
    assert controller.scale("worker", 1) == ["worker/3", "worker/2", "worker/1"]
    assert sorted(results.get() for _ in range(3)) == [("stopped", i) for i in (1, 2, 3)]
    assert results.empty()  # worker/0's handler has not run: it still serves
    assert _ask(program, 0) == (0, "shared")
    assert len(program.groups["worker"]) == 1
    assert controller.scale("worker", 2) == ["worker/1"]  # and grows again, from there
    assert _ask(program, 1) == (1, "shared")


@LOCAL
def test_scaling_refuses_what_cannot_be_done_and_says_why(launch_each_engine, box):
    program = _program(box())
    controller = launch_each_engine(program)
    with pytest.raises(ValueError, match="no group 'actor'; its groups are worker"):
        controller.scale("actor", 3)
    with pytest.raises(ValueError, match="1 node or more, got count=0"):
        controller.scale("worker", 0)
    assert controller.scale("worker", 2) == []


@LOCAL
def test_a_group_handle_follows_its_group_as_it_grows_and_shrinks(launch_each_engine, box):
    program = _program(box())
    learner = program.add_node(lp.CourierNode(Learner, program.group_handle("worker")),
                               label="learner")
    controller = launch_each_engine(program)
    client = learner.dereference()
    assert client.ask_all() == [0, 1]
    controller.scale("worker", 4)
    assert client.members_once(4) == ["worker/0", "worker/1", "worker/2", "worker/3"]
    assert client.ask_all() == [0, 1, 2, 3]
    controller.scale("worker", 1)
    assert client.members_once(1) == ["worker/0"]
    assert client.ask_all() == [0]


def test_a_launcher_that_cannot_start_nodes_of_a_running_program_says_so(slurm, box):
    controller = slurm(_program(box()))
    with pytest.raises(NotImplementedError, match="launched with slurm cannot be scaled"):
        controller.scale("worker", 3)


def _noop(*_, **__):
    return None


def test_a_replica_is_made_with_the_arguments_the_first_was_made_with():
    first = lp.PyNode(_noop, "x", fn=1, cls=2)  # (keywords a constructor's own names shadow)
    made = first.replica()
    assert made is not first and made.arguments() == first.arguments()
    allocated = lp.PyNode(_noop)
    allocated.allocate_address("extra")
    with pytest.raises(ValueError, match="addresses were allocated to it after it was made"):
        allocated.replica()
