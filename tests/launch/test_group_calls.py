"""Group handles under every launch type: `program.group_handle(label)` and
`lp.GroupHandle(handles)` become a GroupClient in a node (also inside a dataclass), whose
calls go to every member in order, fail partially with every member's outcome, scatter,
choose a live member, and are drawn as one edge to the group; the failures of a node's
broadcasts are in its status."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time

import pytest

import launchpad as lp
from launchpad import courier
from launchpad.launch.runtime import status_text
from tests.launch.helpers import TIMEOUT

pytestmark = pytest.mark.timeout(4 * TIMEOUT)


class Actor:
    def __init__(self, index: int):
        self._index = index

    def whoami(self, value=None):
        return self._index, value

    def pid(self):
        return os.getpid()

    def fail_if(self, index):
        if index == self._index:
            raise ValueError(f"actor {index} fails on purpose")
        return self._index


@dataclasses.dataclass
class Wiring:
    actors: object


def _learner(wiring, results):
    actors = wiring.actors
    results.put((len(actors), actors.call.whoami("w"), actors.scatter.whoami(list("abc")),
                 actors[1:].call.whoami(), actors[0].whoami()))
    try:
        actors.call.fail_if(1)
    except lp.GroupCallError as e:
        results.put((e.failed, [r if not isinstance(r, Exception) else type(r).__name__
                                for r in e.results]))
    results.put(sorted({actors.choose.whoami()[0] for _ in range(6)}))


def _program(results, *, by_list: bool) -> lp.Program:
    program = lp.Program("group")
    with program.group("actor"):
        handles = [program.add_node(lp.CourierNode(Actor, i)) for i in range(3)]
    group = lp.GroupHandle(handles) if by_list else program.group_handle("actor")
    program.add_node(lp.PyNode(_learner, Wiring(group), results), label="learner")
    return program


@pytest.mark.parametrize("by_list", [False, True])
def test_a_group_handle_becomes_a_group_client_in_a_node(launch, box, by_list):
    results = box()
    launch(_program(results, by_list=by_list))
    assert results.get() == (3, [(0, "w"), (1, "w"), (2, "w")],
                             [(0, "a"), (1, "b"), (2, "c")], [(1, None), (2, None)], (0, None))
    assert results.get() == (["actor/1"], [0, "ValueError", 2])
    assert results.get() == [0, 1, 2]


def test_bad_group_handles_are_named():
    program = lp.Program("bad")
    with pytest.raises(ValueError, match="no group 'actor'"):
        program.group_handle("actor")
    with pytest.raises(TypeError, match="list of one or more node handles"):
        lp.GroupHandle([])


class Caller:
    def __init__(self, actors):
        self._actors = actors

    def pids(self):
        # A deadline per member: a member found gone at once fails the call
        # (ServerUnavailableError); one found gone while idle is waited for, as a restarting
        # member is, and fails it at the deadline (CallTimeoutError).
        return self._actors.call(timeout=3).pid()

    def choose(self):
        return self._actors.choose(timeout=TIMEOUT).whoami()[0]


def test_a_member_killed_fails_a_call_named_and_choose_leaves_it(launch_processes):
    program = lp.Program("group-kill")
    # Restarted, after long enough for the calls below to meet it gone.
    with program.group("actor", restart=lp.RestartPolicy(1, backoff_secs=10,
                                                         max_backoff_secs=10)):
        for i in range(3):
            program.add_node(lp.CourierNode(Actor, i))
    caller = program.add_node(lp.CourierNode(Caller, program.group_handle("actor")),
                              label="caller")
    launch_processes(program)
    client = caller.dereference()
    pids = client.pids()
    os.kill(pids[1], signal.SIGKILL)
    deadline = time.monotonic() + TIMEOUT
    while True:  # until the kill has taken: the member's socket is gone with its process
        try:
            client.pids()
        except lp.GroupCallError as e:
            assert e.failed == ["actor/1"], e
            assert isinstance(e.results[1], (courier.ServerUnavailableError,
                                             courier.CallTimeoutError)), e.results[1]
            break
        assert time.monotonic() < deadline, "the killed member still answered"
    assert {client.choose() for _ in range(6)} == {0, 2}


def test_the_picture_draws_one_edge_to_the_group():
    program = lp.Program("drawn")
    with program.group("actor"):
        for i in range(2):
            program.add_node(lp.CourierNode(Actor, i))
    program.add_node(lp.PyNode(_learner, Wiring(program.group_handle("actor")), None),
                     label="learner")
    dot = program.to_dot(collapse_at=None)
    edges = [line for line in dot.splitlines() if "->" in line]
    assert len(edges) == 1 and "lhead=" in edges[0], dot


class Broadcaster:
    def __init__(self, actors):
        self._actors = actors

    def broadcast_fail_if(self, index):
        self._actors.broadcast.fail_if(index)


def test_broadcast_failures_are_in_the_callers_status(launch_processes):
    program = lp.Program("group-broadcast")
    with program.group("actor"):
        for i in range(3):
            program.add_node(lp.CourierNode(Actor, i))
    caller = program.add_node(lp.CourierNode(Broadcaster, program.group_handle("actor")),
                              label="caller")
    controller = launch_processes(program)
    client = caller.dereference()
    client.broadcast_fail_if(1)
    client.broadcast_fail_if(1)
    client.broadcast_fail_if(2)
    deadline = time.monotonic() + TIMEOUT
    while True:  # until the caller's telemetry (every REPORT_SECS) has brought them
        status = controller.status()
        node = next(n for n in status.nodes if n.name == "caller/0")
        if node.broadcast_errors == {"actor/1": 2, "actor/2": 1}:
            break
        assert time.monotonic() < deadline, node.broadcast_errors
        threading.Event().wait(0.1)
    assert not any(n.broadcast_errors for n in status.nodes if n.name != "caller/0")
    assert "caller/0: broadcasts that failed: actor/1 2, actor/2 1" in status_text.caption(
        status)
