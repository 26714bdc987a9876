"""A group that grows and shrinks while its program runs (`Controller.scale`): new nodes are
made as the group's first was, with their own index and the same handles; removed ones stop
gracefully (their stop handlers run), from the highest index down, and the rest runs on."""

import threading

import pytest

import launchpad as lp
from launchpad import context
from tests.launch.helpers import TIMEOUT

# The launchers that start nodes of a running program.
ELASTIC = pytest.mark.parametrize("launch_each_engine",
                                  ["local_mt", "local_mp", "slurm", "ray"], indirect=True)


class Worker:
    """Says which node it is and what it was given; says when it is stopped."""

    def __init__(self, given, box):
        self._given = given
        self._index = context.current().index
        lp.register_stop_handler(lambda: box.put(("stopped", self._index)))

    def whoami(self) -> tuple:
        return self._index, self._given

    def hold(self, box) -> int:
        """Returns at once on worker/0; elsewhere says it holds, then waits for its stop."""
        if self._index:
            box.put(("holding", self._index))
            lp.wait_for_stop()
        return self._index


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

    def hold_all(self, box):
        """The group call `hold` to every member: its result, or its error's words."""
        try:
            return self._workers.call.hold(box)
        except lp.courier.GroupCallError as e:
            return e.failed, str(e)


def _program(box, size=2):
    program = lp.Program("elastic")
    with program.group("worker"):
        for _ in range(size):
            program.add_node(lp.CourierNode(Worker, "shared", box))
    return program


def _launch(launch, program, tmp_path, most=None):
    """Launches `program`; under Slurm, its job holds room for `most` workers."""
    if launch.launch_type == "slurm" and most:
        return launch(program, slurm=lp.SlurmSettings(run_dir=str(tmp_path),
                                                      max_nodes={"worker": most}))
    return launch(program)


def _ask(program, index):
    handle = program.groups["worker"][index].create_handle()
    return handle.dereference().futures.whoami().result(timeout=TIMEOUT)


@ELASTIC
def test_a_group_grows_with_nodes_made_as_its_first(box, launch_each_engine, tmp_path):
    results = box()
    program = _program(results)
    controller = _launch(launch_each_engine, program, tmp_path, most=4)
    assert controller.scale("worker", 4) == ["worker/2", "worker/3"]
    assert [_ask(program, i) for i in range(4)] == [(i, "shared") for i in range(4)]
    assert sorted(n.name for n in controller.status().nodes if n.name.startswith("worker")) \
        == ["worker/0", "worker/1", "worker/2", "worker/3"]


@ELASTIC
def test_a_group_shrinks_from_its_highest_index_and_the_rest_runs_on(box, launch_each_engine):
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


@ELASTIC
def test_scaling_refuses_what_cannot_be_done_and_says_why(box, launch_each_engine):
    program = _program(box())
    controller = launch_each_engine(program)
    with pytest.raises(ValueError, match="no group 'actor'; its groups are worker"):
        controller.scale("actor", 3)
    with pytest.raises(ValueError, match="1 node or more, got count=0"):
        controller.scale("worker", 0)
    assert controller.scale("worker", 2) == []


@ELASTIC
def test_a_group_handle_follows_its_group_as_it_grows_and_shrinks(box, launch_each_engine,
                                                                  tmp_path):
    program = _program(box())
    learner = program.add_node(lp.CourierNode(Learner, program.group_handle("worker")),
                               label="learner")
    controller = _launch(launch_each_engine, program, tmp_path, most=4)
    client = learner.dereference()
    assert client.ask_all() == [0, 1]
    controller.scale("worker", 4)
    assert client.members_once(4) == ["worker/0", "worker/1", "worker/2", "worker/3"]
    assert client.ask_all() == [0, 1, 2, 3]
    controller.scale("worker", 1)
    assert client.members_once(1) == ["worker/0"]
    assert client.ask_all() == [0]


@ELASTIC
def test_a_call_in_flight_to_a_removed_member_fails_naming_it(box, launch_each_engine):
    program = _program(box())
    learner = program.add_node(lp.CourierNode(Learner, program.group_handle("worker")),
                               label="learner")
    controller = launch_each_engine(program)
    holding = box()
    call = learner.dereference().futures.hold_all(holding)
    assert holding.get() == ("holding", 1)
    assert controller.scale("worker", 1) == ["worker/1"]
    failed, words = call.result(timeout=TIMEOUT)
    assert failed == ["worker/1"]
    assert "worker/1 left the group (its group shrank) with the call in flight" in words


def test_a_slurm_job_without_room_refuses_to_grow_and_the_program_runs_on(box, slurm):
    program = _program(box())  # 2 workers of 1 CPU: a job of 1 host of 2 CPUs
    controller = slurm(program)
    with pytest.raises(lp.LaunchError) as refused:
        controller.scale("worker", 3)
    assert "cannot grow by 1 node of 1 CPUs" in str(refused.value)
    assert "lp.SlurmSettings(max_nodes={'worker': 3})" in str(refused.value)
    assert len(program.groups["worker"]) == 2
    assert sorted(n.name for n in controller.status().nodes) == ["worker/0", "worker/1"]
    assert [_ask(program, i) for i in range(2)] == [(i, "shared") for i in range(2)]
    assert controller.scale("worker", 1) == ["worker/1"]  # what it frees is room again
    assert controller.scale("worker", 2) == ["worker/1"]
    assert _ask(program, 1) == (1, "shared")


def _announce_and_serve(box) -> None:
    box.put(("up", context.current().index))
    lp.wait_for_stop()


def test_a_detached_slurm_program_is_scaled_through_its_controller_in_the_job(box, slurm,
                                                                               tmp_path):
    results = box()
    program = lp.Program("elastic-detached")
    with program.group("worker"):
        program.add_node(lp.PyNode(_announce_and_serve, results))
    controller = slurm(program, detach=True,
                       slurm=lp.SlurmSettings(run_dir=str(tmp_path), max_nodes={"worker": 2}))
    assert results.get() == ("up", 0)
    assert controller.scale("worker", 2) == ["worker/1"]
    assert results.get() == ("up", 1)
    assert controller.scale("worker", 1) == ["worker/1"]
    assert sorted(n.name for n in controller.status().nodes) == ["worker/0"]
    controller.stop()
    assert controller.wait(timeout=TIMEOUT)
    with pytest.raises(lp.ProgramStoppedError, match="'elastic-detached'.*not running"):
        controller.scale("worker", 2)


def test_a_ray_group_grows_into_bundles_it_freed_or_is_refused_named(box, ray_launch,
                                                                     ray_cluster):
    program = _program(box())
    # A bundle of 3 CPUs on each of the two Ray nodes of 4: no room for a third.
    controller = ray_launch(program, resources={"worker": lp.Resources(cpus=3)},
                            ray=lp.RaySettings(placement={"worker": "STRICT_SPREAD"},
                                               placement_timeout_secs=2))
    with pytest.raises(lp.LaunchError) as refused:
        controller.scale("worker", 3)
    assert ("no room for 1 more node of group 'worker' of program 'elastic' within 2s"
            in str(refused.value))
    assert len(program.groups["worker"]) == 2 and _ask(program, 1) == (1, "shared")
    assert controller.scale("worker", 1) == ["worker/1"]
    assert controller.scale("worker", 2) == ["worker/1"]  # into the bundle it left
    assert _ask(program, 1) == (1, "shared")
    hosts = controller.hosts()
    assert {hosts['worker/0'], hosts['worker/1']} == set(ray_cluster.node_addresses)


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
