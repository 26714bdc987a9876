"""A running program changed into its next version (`Controller.plan` and `.apply`): nodes
made of other code are replaced - a stateful one restores its state - new ones added, others
removed, the rest left running; what cannot change live is refused with every reason, and
nothing is applied."""

import concurrent.futures
import importlib
import json
import os
import pathlib
import sys
import textwrap
import threading
import uuid

import pytest

import launchpad as lp
from tests.launch.helpers import TIMEOUT

LAUNCHERS = pytest.mark.parametrize("launch_each_engine", ["local_mt", "local_mp"],
                                    indirect=True)

CODE = '''
import launchpad as lp

STEP = {step}


class Learner:
    """Counts its steps; its count is its state (lp.StatePolicy)."""

    def __init__(self):
        self.steps = 0

    def step(self):
        self.steps += STEP
        return self.steps

    def save_state(self):
        return self.steps

    def restore_state(self, steps):
        self.steps = steps


class Evaluator:
    def __init__(self, learner):
        self._learner = learner

    def version(self):
        return {version!r}


class Worker:
    def whoami(self):
        return lp.context.current().index


def make_program(workers=2):
    program = lp.Program("versioned")
    with program.group("learner", state=lp.StatePolicy(every_secs=3600)):
        learner = program.add_node(lp.CourierNode(Learner))
    program.add_node(lp.CourierNode(Evaluator, learner), label="evaluator")
    with program.group("worker"):
        for _ in range(workers):
            program.add_node(lp.CourierNode(Worker))
    return program
'''


@pytest.fixture
def code(tmp_path, monkeypatch):
    """`code(step=, version=)`: the program's module, written (again) and (re)loaded; node
    processes import it from the same folder."""
    name = f"versioned_{uuid.uuid4().hex[:8]}"
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        path for path in (str(tmp_path), os.environ.get("PYTHONPATH")) if path))

    def write(step=1, version="v1"):
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(CODE.format(step=step,
                                                                           version=version)))
        importlib.invalidate_caches()
        if name in sys.modules:
            return importlib.reload(sys.modules[name])
        return importlib.import_module(name)

    yield write
    sys.modules.pop(name, None)


def _client(controller, label, index=0):
    handle = controller.program.groups[label][index].create_handle()
    return handle.dereference()


def _launched_three_steps_in(code, launch):
    """The program launched, its learner 3 steps in: its controller and the learner."""
    controller = launch(code().make_program())
    learner = _client(controller, "learner")
    assert [learner.step() for _ in range(3)] == [1, 2, 3]
    return controller, learner


@LAUNCHERS
def test_a_node_whose_code_changed_is_replaced_and_the_rest_runs_on(code,
                                                                    launch_each_engine):
    controller, learner = _launched_three_steps_in(code, launch_each_engine)
    assert _client(controller, "evaluator").version() == "v1"

    new = code(version="v2").make_program()
    plan = controller.plan(new)
    assert (plan.replaced, plan.added, plan.removed, plan.refused) == (
        ("evaluator/0",), (), (), ())
    assert plan.unchanged == ("learner/0", "worker/0", "worker/1")
    assert "0 to add, 1 to replace, 0 to remove, 3 unchanged\n  ~ evaluator/0" in str(plan)
    assert _client(controller, "evaluator").version() == "v1"  # a plan changes nothing

    applied = controller.apply(new)
    assert applied.replaced == ("evaluator/0",) and applied.applied_at is not None
    assert _client(controller, "evaluator").version() == "v2"
    assert learner.step() == 4  # the same learner, never stopped
    assert controller.restarts().get("learner/0", 0) == 0


@LAUNCHERS
def test_a_replaced_stateful_node_restores_its_state_in_its_new_code(code,
                                                                     launch_each_engine):
    controller, _ = _launched_three_steps_in(code, launch_each_engine)
    applied = controller.apply(code(step=10).make_program())
    assert applied.replaced == ("learner/0",)  # the evaluator holds its handle, unchanged
    assert _client(controller, "learner").step() == 13  # saved at its stop: 3; then + 10


@pytest.mark.parametrize("launch_each_engine", ["local_mp"], indirect=True)
def test_only_the_groups_named_change_the_others_run_on_as_they_are(code,
                                                                    launch_each_engine):
    controller, learner = _launched_three_steps_in(code, launch_each_engine)
    new = code(step=10, version="v2").make_program(workers=3)  # all three groups differ
    plan = controller.plan(new, only=["evaluator"])
    assert (plan.replaced, plan.added, plan.kept) == (
        ("evaluator/0",), (), ("learner/0", "worker/2"))
    assert "  = learner/0 (differs; its group is not among those applied)" in str(plan)
    controller.apply(new, only=["evaluator"])
    assert _client(controller, "evaluator").version() == "v2"
    assert learner.step() == 4  # the old code, still running
    assert len(controller.program.groups["worker"]) == 2
    assert "only names groups ['critic']" in str(controller.plan(new, only=["critic"]))


@LAUNCHERS
def test_nodes_are_added_and_removed_as_the_new_program_has_them(code, launch_each_engine):
    module = code()
    controller = launch_each_engine(module.make_program(workers=2))
    grown = controller.apply(module.make_program(workers=4))
    assert (grown.added, grown.replaced) == (("worker/2", "worker/3"), ())
    assert [_client(controller, "worker", i).whoami() for i in range(4)] == [0, 1, 2, 3]
    shrunk = controller.apply(module.make_program(workers=1))
    assert shrunk.removed == ("worker/3", "worker/2", "worker/1")
    assert sorted(n.name for n in controller.status().nodes) == [
        "evaluator/0", "learner/0", "worker/0"]


def _archived(module, program: lp.Program) -> lp.Program:
    """`program` with a group "archive" that keeps state."""
    with program.group("archive", state=lp.StatePolicy(every_secs=3600)):
        program.add_node(lp.CourierNode(module.Learner))
    return program


@LAUNCHERS
def test_a_new_group_keeps_state_in_a_run_that_keeps_states(code, launch_each_engine):
    controller, _ = _launched_three_steps_in(code, launch_each_engine)
    module = code()
    assert controller.apply(_archived(module, module.make_program())).added == ("archive/0",)
    archive = _client(controller, "archive")
    assert [archive.step() for _ in range(2)] == [1, 2]
    module = code(step=10)  # both stateful nodes replaced: each saves, and restores
    applied = controller.apply(_archived(module, module.make_program()))
    assert applied.replaced == ("learner/0", "archive/0")
    assert _client(controller, "archive").step() == 12
    assert _client(controller, "learner").step() == 13
    groups = json.loads((pathlib.Path(controller.states.folder) / "program.json").read_text())
    assert groups["archive"] == ["CourierNode"]  # what a later resume= is checked against


@pytest.mark.parametrize("launch_each_engine", ["local_mp"], indirect=True)
def test_a_new_group_that_keeps_state_is_refused_in_a_run_that_keeps_none(
        code, launch_each_engine):
    module = code()
    stateless = lp.Program("versioned")
    stateless.add_node(lp.CourierNode(module.Worker), label="worker")
    controller = launch_each_engine(stateless)
    grown = lp.Program("versioned")
    grown.add_node(lp.CourierNode(module.Worker), label="worker")
    with pytest.raises(ValueError, match=r"! group 'archive' is new and keeps state "
                                         r"\(lp.StatePolicy\), and this run keeps none"):
        controller.apply(_archived(module, grown))
    assert "archive" not in controller.program.groups


def _fails_its_first_run(marker):
    if not os.path.exists(marker):
        open(marker, "w").close()
        raise RuntimeError("the first run fails")
    lp.wait_for_stop()


@LAUNCHERS
def test_a_group_apply_adds_restarts_as_its_policy_says(code, launch_each_engine, tmp_path):
    module = code()
    controller = launch_each_engine(module.make_program())
    grown = module.make_program()
    with grown.group("flaky", restart=lp.RestartPolicy(max_restarts=1)):
        grown.add_node(lp.PyNode(_fails_its_first_run, str(tmp_path / "ran")))
    assert controller.apply(grown).added == ("flaky/0",)
    assert controller.wait_for_restarts("flaky/0", 1, TIMEOUT)  # not a failed program
    assert controller.wait_for_started("flaky/0", TIMEOUT)
    assert controller.failure is None and _client(controller, "worker").whoami() == 0


class Gate:
    """Opened by the test; waited on by a node that must not end before it is."""

    def __init__(self):
        self._open = threading.Event()

    def open(self) -> None:
        self._open.set()

    def wait(self) -> bool:
        return self._open.wait(TIMEOUT)


class Versioned:
    """Says its version; the first version's stop waits for the gate, and says it waits."""

    def __init__(self, version, gate, said):
        self._version = version
        if version == "v1":
            lp.register_stop_handler(lambda: (said.put("v1 stopping"), gate.wait()))

    def version(self) -> str:
        return self._version


@LAUNCHERS
def test_a_lookup_while_a_node_is_replaced_waits_for_the_new_one(box, launch_each_engine):
    said = box()

    def make(version: str) -> lp.Program:
        program = lp.Program("replaced")
        gate = program.add_node(lp.CourierNode(Gate), label="gate")
        program.add_node(lp.CourierNode(Versioned, version, gate, said), label="evaluator")
        return program

    controller = launch_each_engine(make("v1"))
    assert _client(controller, "evaluator").version() == "v1"

    def address_of_the_evaluator() -> str:  # as a handle's lookup asks the controller
        return controller.protocol.resolve("evaluator", 0, "", TIMEOUT).result(TIMEOUT)

    first = address_of_the_evaluator()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        applying = pool.submit(controller.apply, make("v2"))
        assert said.get() == "v1 stopping"  # the old one ends; its server is stopping
        looked_up = pool.submit(address_of_the_evaluator)
        _client(controller, "gate").open()
        assert looked_up.result(TIMEOUT) != first  # the new one's, not the dying one's
        assert applying.result(TIMEOUT).replaced == ("evaluator/0",)
    assert _client(controller, "evaluator").version() == "v2"


def _evaluator_fn(learner):
    lp.wait_for_stop()


@pytest.mark.parametrize("launch_each_engine", ["local_mp"], indirect=True)
def test_what_cannot_change_live_is_refused_with_every_reason_and_nothing_applied(
        code, launch_each_engine):
    module = code()
    controller = launch_each_engine(module.make_program())
    changed = lp.Program("versioned")
    with changed.group("learner", state=lp.StatePolicy(every_secs=3600)):
        learner = changed.add_node(lp.CourierNode(module.Learner))
    changed.add_node(lp.PyNode(_evaluator_fn, learner), label="evaluator")
    with pytest.raises(ValueError) as refused:
        controller.apply(changed)
    words = str(refused.value)
    assert "! node evaluator/0 would change type, from CourierNode to PyNode" in words
    assert "! group 'worker' would vanish" in words
    assert "Nothing was applied" in words
    assert _client(controller, "evaluator").version() == "v1"
    renamed = lp.Program("other")
    renamed.add_node(lp.CourierNode(module.Learner), label="learner")
    assert "the new program is named 'other'" in "\n".join(controller.plan(renamed).refused)

