"""The controller protocol's batched calls, which a host agent makes for the nodes of its
host (host_agent.py): `heartbeats` answers each run as `heartbeat` would, `reports` keeps
each sample as `report` would, and a batch with one bad entry is refused whole, naming the
entry, with nothing of it kept."""

from __future__ import annotations

import pytest

import launchpad as lp
from launchpad import control, telemetry

pytestmark = pytest.mark.usefixtures("no_leaked_threads")


@pytest.fixture
def controller():
    program = lp.Program("batched")
    with program.group("worker"):
        for _ in range(2):
            program.add_node(lp.PyNode(int))
    controller = lp.Controller(program)
    yield controller
    controller.kill()
    assert controller.wait(timeout=30)


@pytest.fixture
def client(controller):
    client = control.ControllerClient(controller.address, controller.token)
    yield client
    client.close()


def _memory(controller, name: str) -> int | None:
    return next(n.memory_bytes for n in controller.status().nodes if n.name == name)


def test_heartbeats_answer_each_run_as_its_own_heartbeat_would(controller, client):
    client.node_started("worker", 0, "run-a", "host", 1, True)
    client.node_started("worker", 1, "run-b", "host", 2, True)
    assert client.heartbeats([("worker", 0, "run-a"), ("worker", 1, "old-run")],
                             timeout=10) == [True, False]  # a run given up: False
    assert client.heartbeats([], timeout=10) == []


def test_reports_keep_each_sample_of_the_runs_current_run(controller, client):
    client.node_started("worker", 0, "run-a", "host", 1, True)
    client.node_started("worker", 1, "run-b", "host", 2, True)
    client.reports([("worker", 0, "run-a", telemetry.NodeSample(1.0, 111, {})),
                    ("worker", 1, "stale", telemetry.NodeSample(1.0, 222, {}))], timeout=10)
    assert _memory(controller, "worker/0") == 111
    assert _memory(controller, "worker/1") is None  # of a run that is not its current one


def test_a_batch_with_a_bad_entry_is_refused_whole_naming_it(controller, client):
    client.node_started("worker", 0, "run-a", "host", 1, True)
    good = ("worker", 0, "run-a", telemetry.NodeSample(1.0, 111, {}))
    with pytest.raises(TypeError, match=r"reports takes entries of \(str, int, str, "
                                        r"NodeSample\); entry 1 is"):
        client.reports([good, ("worker", 0, "run-a", "not a sample")], timeout=10)
    with pytest.raises(lp.UnknownNodeError, match="has no node nobody/0"):
        client.reports([good, ("nobody", 0, "run", telemetry.NodeSample(1.0, 5, {}))],
                       timeout=10)
    assert _memory(controller, "worker/0") is None  # nothing of either batch was kept
    with pytest.raises(TypeError, match=r"heartbeats takes entries of \(str, int, str\); "
                                        r"entry 0 is"):
        client.heartbeats([("worker", "0", "run-a")], timeout=10)

