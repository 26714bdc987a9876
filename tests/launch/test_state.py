"""Stateful nodes (lp.StatePolicy, runtime/state_store.py) under the local launch types (a
restart under slurm and ray too): a node restarted, or a program resumed, starts from its
latest state; saves never overlap a handler; a save that fails is the node's failure, named;
torn and foreign state files are never read; `resume=` refuses a program whose groups
differ."""

from __future__ import annotations

import os
import threading

import cloudpickle
import pytest

import launchpad as lp
from launchpad.launch.runtime import errors, private_files, state_store
from tests.cli.helpers import cli
from tests.launch.helpers import TIMEOUT
from tests.processes import ROOT

pytestmark = pytest.mark.timeout(4 * TIMEOUT)
LOCAL = ["local_mt", "local_mp"]


class Counter:
    """Counts its calls; its state is the count. `overlaps` counts saves made while a call
    ran (there must be none)."""

    def __init__(self):
        self.count = 0
        self._running = 0
        self._lock = threading.Lock()
        self.overlaps = 0
        self.restored = None
        self._crash = threading.Event()
        self._stopping = False

    def run(self):
        lp.register_stop_handler(self._stop)
        self._crash.wait()
        if not self._stopping:
            raise RuntimeError("failing on purpose, to be restarted")

    def _stop(self):
        self._stopping = True
        self._crash.set()

    def add(self, hold_secs: float = 0.0):
        with self._lock:
            self._running += 1
        try:
            threading.Event().wait(hold_secs)  # a call that takes a while (not a sync)
            self.count += 1
            return self.count
        finally:
            with self._lock:
                self._running -= 1

    def fail(self):
        """Makes the node's run() raise: the node fails, and is restarted."""
        self._crash.set()

    def status(self):
        return self.count, self.restored, self.overlaps

    def save_state(self):
        with self._lock:
            self.overlaps += self._running > 0
        return {"count": self.count}

    def restore_state(self, state):
        self.restored = state["count"]
        self.count = state["count"]


def _program(name="stateful", nodes=1, every_secs=0.2, keep=2):
    program = lp.Program(name)
    with program.group("counter", restart=lp.RestartPolicy(2, backoff_secs=0.1),
                       state=lp.StatePolicy(every_secs=every_secs, keep=keep)):
        handles = [program.add_node(lp.CourierNode(Counter)) for _ in range(nodes)]
    return program, handles


def _saved(controller, node="counter.0") -> list[str]:
    folder = os.path.join(controller.states.folder, node)
    return sorted(name for name in os.listdir(folder) if name.endswith(".state"))


def _latest_count(controller, node="counter.0"):
    """The count in the node's newest state file (None: none yet)."""
    saved = _saved(controller, node)
    if not saved:
        return None
    path = os.path.join(controller.states.folder, node, saved[-1])
    return cloudpickle.loads(private_files.read_private(path))["count"]


def _until(condition, what: str) -> None:
    deadline = threading.Event()
    for _ in range(int(TIMEOUT / 0.05)):
        if condition():
            return
        deadline.wait(0.05)
    raise AssertionError(f"{what} within {TIMEOUT}s")


@pytest.mark.parametrize("launch_failing", [*LOCAL, "slurm", "ray"], indirect=True)
def test_a_restarted_node_starts_from_its_latest_state(launch_failing):
    program, (handle,) = _program()
    controller = launch_failing(program)
    client = handle.dereference()
    for _ in range(5):
        client.add()
    _until(lambda: _latest_count(controller) == 5, "the count of 5 saved")
    assert len(_saved(controller)) <= 2  # keep=2
    client.fail()
    assert controller.wait_for_restarts("counter/0", 1, TIMEOUT)
    _until(lambda: _reached(handle), "the restarted node answered")
    count, restored, _ = handle.dereference().status()
    assert restored == 5 and count == 5


def _reached(handle) -> bool:
    try:
        return handle.dereference().status()[1] is not None
    except Exception:  # noqa: BLE001 - still restarting
        return False


@pytest.mark.parametrize("launch_failing", LOCAL, indirect=True)
def test_saves_never_overlap_a_handler(launch_failing):
    program, (handle,) = _program(every_secs=0.05)
    controller = launch_failing(program)
    client = handle.dereference()
    calls = [client.futures.add(0.03) for _ in range(40)]
    assert [f.result(TIMEOUT) for f in calls]
    _until(lambda: len(_saved(controller)) == 2, "saves made")
    assert client.status()[2] == 0  # no save while a call ran


class Unsaveable:
    """A served object (no run() of its own) whose state does not pickle."""

    def save_state(self):
        return threading.Lock()

    def restore_state(self, state):
        raise AssertionError("nothing was saved to restore")


def test_a_program_resumes_from_its_last_run_and_refuses_another_graph(tmp_path,
                                                                       monkeypatch):
    monkeypatch.setenv("LAUNCHPAD_RUN_DIR", str(tmp_path))
    program, (handle,) = _program("resumed", every_secs=30)
    first = lp.launch(program, launch_type="local_mp")
    for _ in range(3):
        handle.dereference().add()
    assert first.stop_and_wait()  # the graceful stop saves the last state
    again, (handle,) = _program("resumed", every_secs=30)
    second = lp.launch(again, launch_type="local_mp", resume=first.run_id)
    try:
        assert handle.dereference().status()[:2] == (3, 3)
    finally:
        assert second.stop_and_wait()
    bigger, _ = _program("resumed", nodes=2)
    with pytest.raises(errors.StateError, match="differs .* in groups counter"):
        lp.launch(bigger, launch_type="local_mp", resume=first.run_id)
    partial = lp.launch(bigger, launch_type="local_mt", resume=first.run_id,
                        resume_partial=True)
    assert partial.stop_and_wait()


def test_torn_and_foreign_state_files_are_never_read(tmp_path):
    spec = state_store.StateSpec(str(tmp_path / "state"), None, every_secs=60, keep=2)
    node = state_store.NodeState(spec, "counter/0")
    folder = tmp_path / "state" / "counter.0"
    folder.mkdir(parents=True, mode=0o700)
    os.chmod(tmp_path / "state", 0o700)
    (folder / "000000001.state").write_bytes(cloudpickle.dumps({"count": 1}))
    (folder / "000000002.state.partial").write_bytes(b"half a pick")  # a save cut short
    for path in folder.iterdir():
        os.chmod(path, 0o600)
    counter = Counter()
    node.attach(counter, _StoppedContext())
    assert counter.restored == 1
    os.chown(folder / "000000001.state", 4321, 4321)  # another user's
    with pytest.raises(errors.UnsafePathError, match="belongs to uid 4321"):
        state_store.NodeState(spec, "counter/0").attach(Counter(), _StoppedContext())


class _StoppedContext:
    """What attach needs of a node's context, for a node that has stopped already."""

    stop_event = threading.Event()
    stop_event.set()

    def add_stop_handler(self, handler):
        pass


def test_bad_state_policies_are_named():
    with pytest.raises(ValueError, match="every_secs must be a number > 0"):
        lp.StatePolicy(every_secs=0)
    with pytest.raises(ValueError, match="keep must be an int >= 1"):
        lp.StatePolicy(keep=0)
    with pytest.raises(TypeError, match="must be an lp.StatePolicy"):
        with lp.Program("p").group("g", state={"every_secs": 1}):
            pass
    with pytest.raises(errors.StateError, match="no group of program 'plain' keeps state"):
        plain = lp.Program("plain")
        plain.add_node(lp.PyNode(int), "n")
        lp.launch(plain, launch_type="local_mt", resume="any-run")


def test_launchpad_launch_resume_gives_the_script_the_run(tmp_path):
    # (the script imports this module: `launchpad launch` puts only its folder on the path)
    env = {"LAUNCHPAD_RUN_DIR": str(tmp_path), "PYTHONPATH": ROOT}
    first = cli("launch", "tests/launch/state_script.py", "4", env=env)
    assert first.returncode == 0, first.stderr
    run_id = first.stdout.split()[1]
    assert first.stdout.split()[2:] == ["restored", "None", "count", "4"]
    second = cli("launch", "--resume", run_id, "tests/launch/state_script.py", "2", env=env)
    assert second.returncode == 0, second.stderr
    assert second.stdout.split()[2:] == ["restored", "4", "count", "6"]


class CrashingOnce:
    """Counts to 3, waits for that state to be saved, and fails; restarted, it reports the
    count it was given back, and stops the program."""

    def __init__(self, results):
        self._results = results
        self._count = 0
        self._restored = None
        self._saves_of_three = 0
        self._saved_three = threading.Event()

    def run(self):
        if self._restored is not None:
            self._results.put(self._restored)
            lp.stop()
            return
        self._count = 3
        assert self._saved_three.wait(TIMEOUT), "no save of the count"
        raise RuntimeError("failing once, on purpose")

    def save_state(self):
        # Saves are made one after another: a second save of the count means the first is
        # written.
        self._saves_of_three += self._count == 3
        if self._saves_of_three == 2:
            self._saved_three.set()
        return self._count

    def restore_state(self, state):
        self._restored = state


@pytest.mark.parametrize("launch_failing", ["slurm", "ray"], indirect=True)
def test_a_detached_programs_node_restarts_from_its_state(launch_failing, box):
    results = box()
    program = lp.Program("detached-state")
    with program.group("counter", restart=lp.RestartPolicy(1, backoff_secs=0.1),
                       state=lp.StatePolicy(every_secs=0.1)):
        program.add_node(lp.CourierNode(CrashingOnce, results))
    controller = launch_failing(program, detach=True)
    assert results.get() == 3
    assert controller.wait(timeout=TIMEOUT)
    assert controller.restarts() == {"counter/0": 1}


class UnsaveableLoop(Unsaveable):
    """A node whose run() is a loop that never returns by itself (a learner's), and that
    swallows every Exception it meets."""

    def run(self):
        while True:
            try:
                threading.Event().wait(0.01)  # a step of work
            except Exception:  # noqa: BLE001 - a careless loop: the failure must still end it
                pass


@pytest.mark.parametrize("launch_failing", LOCAL, indirect=True)
@pytest.mark.parametrize("unsaveable", [Unsaveable, UnsaveableLoop])
def test_a_save_that_fails_is_the_nodes_failure_named_at_once(launch_failing, unsaveable):
    """A served object's node fails as the save fails; so does one whose run() loops for
    good: its loop is ended."""
    program = lp.Program("unsaveable")
    with program.group("counter", state=lp.StatePolicy(every_secs=0.1)):
        program.add_node(lp.CourierNode(unsaveable))
    controller = launch_failing(program)
    with pytest.raises(lp.NodeFailedError, match="counter/0 could not save its state"):
        controller.wait(timeout=TIMEOUT)


@pytest.mark.parametrize("launch_failing", LOCAL, indirect=True)
def test_a_node_whose_run_fails_is_saved_before_its_restart(launch_failing):
    program, (handle,) = _program(every_secs=3600)  # no save of the period's in this test
    controller = launch_failing(program)
    client = handle.dereference()
    for _ in range(3):
        client.add()
    assert _latest_count(controller) is None
    client.fail()  # its run() raises; its object can still answer save_state()
    assert controller.wait_for_restarts("counter/0", 1, TIMEOUT)
    _until(lambda: _reached(handle), "the restarted node answered")
    count, restored, _ = handle.dereference().status()
    assert restored == 3 and count == 3
