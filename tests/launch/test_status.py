"""A running program's status: each node's state, place, restarts, failures and telemetry."""

from __future__ import annotations

import threading
import time

import pytest

import launchpad as lp
from launchpad import control, telemetry
from launchpad.launch.runtime.controller.node_book import NodeBook

pytestmark = pytest.mark.timeout(120)
# (The `launch` fixture has its own leak checks, taken after a cluster's daemons started.)
leak_checked = pytest.mark.usefixtures("no_leaked_processes", "no_leaked_threads")
CALLS = 25


class Echo:
    def ping(self, x):
        return x

    def fail(self):
        raise ValueError("on purpose")


def call_then_wait(echo, calls_done):
    for i in range(CALLS):
        echo.ping(i)
    try:
        echo.fail()
    except ValueError:
        pass
    calls_done()
    lp.stop_event().wait()


def crash():
    raise RuntimeError("crashed on purpose")


def _program(calls_done) -> lp.Program:
    program = lp.Program("status")
    echo = program.add_node(lp.CourierNode(Echo), label="echo")
    program.add_node(lp.PyNode(call_then_wait, echo, calls_done), label="caller")
    # Restarted after a backoff longer than the test: it stays 'restarting', its failure kept.
    with program.group("crasher", restart=lp.RestartPolicy(max_restarts=1, backoff_secs=600,
                                                           max_backoff_secs=600)):
        program.add_node(lp.PyNode(crash))
    return program


def _wait_for(controller, predicate, timeout: float = 60.0) -> telemetry.ProgramStatus:
    """Polls the program's status until `predicate(nodes by name)` holds."""
    deadline = time.monotonic() + timeout
    while True:
        status = controller.status()
        nodes = {node.name: node for node in status.nodes}
        if predicate(nodes):
            return status
        assert time.monotonic() < deadline, f"status never matched: {status}"
        time.sleep(0.1)  # a poll's period, bounded by the deadline


def _calls_reported(nodes) -> bool:
    methods = nodes["echo/0"].methods
    return "ping" in methods and methods["ping"].calls == CALLS and "fail" in methods


@leak_checked
@pytest.mark.parametrize("launch_type", ["local_mt", "local_mp"])
def test_the_status_has_every_node_its_state_failure_and_calls(launch_type, tmp_path):
    marker = tmp_path / "calls-done"
    controller = lp.launch(_program(lambda: marker.touch()), launch_type=launch_type,
                           terminal="output_to_files")
    try:
        status = _wait_for(controller, lambda nodes: _calls_reported(nodes)
                           and nodes["crasher/0"].state == "restarting")
        nodes = {node.name: node for node in status.nodes}
        assert status.program == "status" and status.launch_type == launch_type
        assert status.state == "running" and not status.failure
        assert [n.name for n in status.nodes] == ["echo/0", "caller/0", "crasher/0"]
        echo = nodes["echo/0"]
        assert (echo.kind, echo.state, echo.restarts) == ("CourierNode", "running", 0)
        assert echo.addresses["echo/0"].startswith("127.0.0.1:")
        assert echo.pid == controller.node_pids()["echo/0"] and echo.host == "127.0.0.1"
        assert echo.uptime_secs is not None and echo.uptime_secs >= 0
        ping, fail = echo.methods["ping"], echo.methods["fail"]
        assert (ping.calls, ping.errors, fail.calls, fail.errors) == (CALLS, 0, 1, 1)
        assert 0 < ping.p50_secs <= ping.p99_secs
        if launch_type == "local_mp":
            assert echo.memory_bytes > 1 << 20 and echo.cpu_secs > 0
        else:  # nodes are threads of this process: its figures are not theirs
            assert echo.memory_bytes is None and echo.cpu_secs is None
        crasher = nodes["crasher/0"]
        assert (crasher.kind, crasher.restarts, len(crasher.failures)) == ("PyNode", 1, 1)
        failure = crasher.failures[0]
        assert failure.restarted and "crashed on purpose" in failure.reason
        assert "RuntimeError: crashed on purpose" in failure.traceback
        assert "in crash" in failure.traceback  # the frame of the function that raised
        # The same status reaches any process holding the token, over the protocol.
        remote = control.ControllerClient(controller.address, controller.token)
        try:
            assert [n.state for n in remote.status().nodes] == [
                n.state for n in controller.status().nodes]
        finally:
            remote.close()
    finally:
        controller.stop()
        controller.wait()
    final = {node.name: node.state for node in controller.status().nodes}
    assert final == {"echo/0": "stopped", "caller/0": "stopped", "crasher/0": "stopped"}
    assert controller.status().state == "stopped"


@leak_checked
def test_a_node_that_fails_for_good_is_failed_and_the_program_says_why():
    program = lp.Program("fails")
    program.add_node(lp.PyNode(crash), label="crasher")
    program.add_node(lp.PyNode(lambda: lp.stop_event().wait()), label="waiter")
    controller = lp.launch(program, launch_type="local_mt")
    with pytest.raises(lp.NodeFailedError):
        controller.wait(timeout=60)
    status = controller.status()
    states = {node.name: node.state for node in status.nodes}
    assert states == {"crasher/0": "failed", "waiter/0": "stopped"}
    assert status.state == "stopped" and "crashed on purpose" in status.failure
    [failure] = status.nodes[0].failures
    assert not failure.restarted


@leak_checked
def test_a_colocation_is_one_unit_and_names_what_it_holds():
    program = lp.Program("colocated")
    started = threading.Event()
    program.add_node(lp.MultiThreadingColocation([
        lp.PyNode(lambda: (started.set(), lp.stop_event().wait())),
        lp.PyNode(lambda: lp.stop_event().wait())]), label="pair")
    with lp.launch(program, launch_type="local_mt") as controller:
        assert started.wait(30)
        [unit] = controller.status().nodes
        assert (unit.name, unit.kind) == ("pair/0", "MultiThreadingColocation(2)")


def test_reports_of_a_run_the_controller_gave_up_are_dropped():
    book = NodeBook({("n", 0): "PyNode"})
    book.started(("n", 0), "first", "127.0.0.1", 10)
    book.failed(("n", 0), "lost", "", restarted=True)
    book.started(("n", 0), "second", "127.0.0.1", 11)
    book.report(("n", 0), "first", telemetry.NodeSample(1.0, 1, {}, taken_at=1.0))
    [status] = book.statuses({})
    assert (status.pid, status.cpu_secs, status.state, status.restarts) == (11, None,
                                                                            "running", 1)
    with pytest.raises(TypeError, match="NodeSample"):
        book.report(("n", 0), "second", {"cpu_secs": 1})
    for bad in ({"actor/1": -1}, {3: 1}, ["actor/1"]):
        with pytest.raises(TypeError, match="broadcast_errors"):
            book.report(("n", 0), "second", telemetry.NodeSample(1.0, 1, {}, 1.0, bad))


def test_cpu_share_and_call_rates_come_from_the_last_two_samples():
    from launchpad.courier.metrics import MethodCounts
    book = NodeBook({("n", 0): "CourierNode"})
    book.started(("n", 0), "run", "127.0.0.1", 10)
    book.report(("n", 0), "run", telemetry.NodeSample(1.0, 5, {"m": MethodCounts(10)},
                                                      taken_at=100.0))
    book.report(("n", 0), "run", telemetry.NodeSample(2.0, 6, {"m": MethodCounts(30)},
                                                      taken_at=102.0))
    [status] = book.statuses({("n", 0): {"n/0": "127.0.0.1:5"}})
    assert status.cpu_percent == pytest.approx(50.0)
    assert status.methods["m"].calls_per_sec == pytest.approx(10.0)
    assert (status.memory_bytes, status.addresses) == (6, {"n/0": "127.0.0.1:5"})


def test_every_launch_type_reports_where_each_node_runs_and_its_calls(launch):
    program = lp.Program("placed")
    echo = program.add_node(lp.CourierNode(Echo), label="echo")
    controller = launch(program)
    client = echo.dereference()
    for i in range(CALLS):
        assert client.ping(i) == i
    status = _wait_for(controller, lambda nodes: "ping" in nodes["echo/0"].methods
                       and nodes["echo/0"].methods["ping"].calls == CALLS)
    [node] = status.nodes
    assert node.state == "running"
    assert node.host == controller.hosts()["echo/0"]
    assert node.pid == controller.node_pids()["echo/0"]
    assert node.addresses["echo/0"].rsplit(":", 1)[0] == node.host
