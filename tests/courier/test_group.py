"""GroupClient (group.py): calls to a group of real servers at once, on every transport -
results in member order, a partial failure with every member's outcome, deadlines per
member, broadcast that never waits, choose that goes to the least loaded and leaves the gone
and the late, scatter, slicing, and arguments pickled once for the whole group."""

from __future__ import annotations

import concurrent.futures
import pickle
import signal
import threading
import time

import numpy as np
import pytest

from launchpad import courier
from launchpad.courier import group as group_module
from launchpad.courier._connection import in_flight
from launchpad.courier._wire import serialization
from tests.courier.conftest import TOKEN, Service

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("courier_transport")]


class Member(Service):
    """A Service that knows its place in the group, and can be held up or made to fail."""

    def __init__(self, index: int):
        super().__init__()
        self.index = index
        self.seen: list = []
        self.fail = False

    def whoami(self, value=None):
        self.seen.append(value)
        if self.fail:
            raise ValueError(f"member {self.index} fails on purpose")
        return self.index, value

    def slow(self):
        self.blocker.block()
        return self.index


@pytest.fixture
def group(serve, connect):
    """A GroupClient of 4 members (the members, and the group)."""
    members = [Member(i) for i in range(4)]
    clients = [connect(serve(m, token=TOKEN).address, token=TOKEN) for m in members]
    made = courier.GroupClient(clients, [f"member/{i}" for i in range(4)])
    yield members, made
    made.close()


def test_call_returns_every_members_result_in_order(group):
    members, made = group
    assert made.call.whoami("x") == [(i, "x") for i in range(4)]
    assert [f.result(10) for f in made.futures.whoami(7)] == [(i, 7) for i in range(4)]


def test_a_partial_failure_raises_with_every_members_outcome(group):
    members, made = group
    members[2].fail = True
    with pytest.raises(courier.GroupCallError, match=r"whoami.*member/2") as raised:
        made.call.whoami(1)
    results = raised.value.results
    assert results[:2] == [(0, 1), (1, 1)] and results[3] == (3, 1)
    assert isinstance(results[2], ValueError) and "member 2 fails" in str(results[2])


def _assert_every_member_times_out(members, made) -> None:
    """A group call of `slow` with a deadline of 0.5 s ends within 5 s, every member's
    outcome a CallTimeoutError; then the members are let go."""
    started = time.monotonic()
    with pytest.raises(courier.GroupCallError) as raised:
        made.call(timeout=0.5).slow()
    assert time.monotonic() - started < 5
    assert all(isinstance(r, courier.CallTimeoutError) for r in raised.value.results)
    for member in members:
        member.blocker.release.set()


def test_a_deadline_applies_to_each_member(group):
    _assert_every_member_times_out(*group)


# The transports whose streams a group call's own thread waits on (in_flight.read_replies).
SELECTABLE = ("local", "tcp")


def _reach_each(made) -> None:
    """A blocking call to each member: its client has reached it, and its one stream (used
    by this thread itself) has no thread of its own."""
    for member in range(len(made)):
        made[member].whoami()


def test_a_group_call_reads_its_replies_on_its_own_thread(group, courier_transport,
                                                          monkeypatch):
    """On the socket transports every member's call is sent and its reply read by the
    calling thread (in_flight.read_replies); elsewhere the calls go as futures."""
    members, made = group
    _reach_each(made)
    read_here = []

    def read_replies(calls, deadline):
        read_here.append(len(calls))
        real_read_replies(calls, deadline)

    real_read_replies = in_flight.read_replies
    monkeypatch.setattr(in_flight, "read_replies", read_replies)
    assert made.call.whoami(5) == [(i, 5) for i in range(4)]
    assert made.scatter.whoami([10, 11, 12, 13]) == [(i, 10 + i) for i in range(4)]
    assert read_here == ([4, 4] if courier_transport in SELECTABLE else [0, 0])


def test_a_deadline_holds_for_calls_on_new_streams(group):
    """Each member's stream is held by another thread's call, so the group call opens new
    ones, whose first record is the server's answer to their hello: the deadline still holds,
    and the held calls still end well."""
    members, made = group
    _reach_each(made)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        held = [pool.submit(made[m].slow) for m in range(4)]
        assert all(member.blocker.entered.wait(5) for member in members)
        _assert_every_member_times_out(members, made)
        assert [f.result(5) for f in held] == [0, 1, 2, 3]
    assert made.call.whoami(2) == [(i, 2) for i in range(4)]


class _Interrupted(BaseException):  # as KeyboardInterrupt
    pass


def test_an_interrupted_group_call_fails_its_calls_and_the_group_goes_on(group):
    """An exception raised in the calling thread while it waits (here by a signal handler,
    as KeyboardInterrupt is) gives up every call not answered; the next call works."""
    members, made = group
    _reach_each(made)

    def interrupt(signum, frame):
        raise _Interrupted

    def interrupt_once_all_wait():
        if all(member.blocker.entered.wait(5) for member in members):
            signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)

    previous = signal.signal(signal.SIGUSR1, interrupt)
    try:
        interrupter = threading.Thread(target=interrupt_once_all_wait)
        interrupter.start()
        with pytest.raises(_Interrupted):
            made.call(timeout=10).slow()
        interrupter.join()
    finally:
        signal.signal(signal.SIGUSR1, previous)
    for member in members:
        member.blocker.release.set()
    assert made.call.whoami(3) == [(i, 3) for i in range(4)]


def test_broadcast_returns_at_once_with_a_member_held_up(group):
    members, made = group
    made[1].futures.slow()  # member 1 is busy until released
    assert members[1].blocker.entered.wait(10)
    started = time.monotonic()
    assert made.broadcast.whoami("b") is None
    assert time.monotonic() - started < 0.5
    deadline = time.monotonic() + 10
    while sum("b" in m.seen for m in members) < 4 and time.monotonic() < deadline:
        threading.Event().wait(0.01)
    assert all("b" in m.seen for m in members)  # member 1's handler pool still took it
    members[1].blocker.release.set()


def test_broadcast_failures_are_counted_per_member(group):
    members, made = group
    members[3].fail = True
    made.broadcast.whoami("c")
    deadline = time.monotonic() + 10
    while made.broadcast_errors()["member/3"] < 1 and time.monotonic() < deadline:
        threading.Event().wait(0.01)
    assert made.broadcast_errors() == {"member/0": 0, "member/1": 0, "member/2": 0,
                                       "member/3": 1}


def test_choose_goes_to_the_least_loaded_member(group):
    members, made = group
    # Three chosen calls held up on three members: the group's calls in flight there.
    held = []
    for started in range(1, 4):
        thread = threading.Thread(target=lambda: held.append(made.choose.slow()))
        thread.start()
        deadline = time.monotonic() + 10
        while sum(m.blocker.entered.is_set() for m in members) < started:
            assert time.monotonic() < deadline, "a chosen call did not arrive"
            threading.Event().wait(0.01)
    free = [m.index for m in members if not m.blocker.entered.is_set()]
    assert len(free) == 1
    assert [made.choose.whoami()[0] for _ in range(3)] == free * 3
    for member in members:
        member.blocker.release.set()
    deadline = time.monotonic() + 10
    while len(held) < 3 and time.monotonic() < deadline:
        threading.Event().wait(0.01)
    assert sorted(held) == sorted(set(range(4)) - set(free))
    # All idle again: the choices go round the members.
    assert {made.choose.whoami()[0] for _ in range(4)} == {0, 1, 2, 3}


def test_choose_skips_a_member_that_is_gone(serve, connect):
    members = [Member(i) for i in range(3)]
    servers = [serve(m, token=TOKEN) for m in members]
    clients = [connect(s.address, token=TOKEN, wait_for_ready=False) for s in servers]
    made = courier.GroupClient(clients)
    assert made.call.whoami() == [(0, None), (1, None), (2, None)]  # all connected
    servers[0].stop()
    servers[1].stop()
    assert {made.choose.whoami()[0] for _ in range(6)} == {2}


def test_choose_leaves_a_member_that_missed_a_deadline_last(group):
    # A member killed while idle shows, on a transport that waits for a restarting server,
    # only as a missed deadline: it is chosen last as a member found gone is.
    members, made = group
    for member in members[:3]:
        member.blocker.release.set()  # only member 3 is held up
    with pytest.raises(courier.GroupCallError) as raised:
        made.call(timeout=0.5).slow()
    assert raised.value.failed == ["member/3"]
    assert {made.choose.whoami()[0] for _ in range(6)} == {0, 1, 2}
    members[3].blocker.release.set()


def test_a_choice_that_missed_its_deadline_is_no_longer_counted_in_flight(group,
                                                                          monkeypatch):
    """Once its member is no longer left last, a member whose chosen call missed its
    deadline is chosen in turn again: the call given up is not counted in flight for ever."""
    monkeypatch.setattr(group_module, "UNAVAILABLE_SECS", 0.0)
    members, made = group
    _reach_each(made)
    for member in members[1:]:
        member.blocker.release.set()  # only member 0, the first chosen, is held up
    with pytest.raises(courier.CallTimeoutError, match="member/0"):
        made.choose(timeout=0.5).slow()
    members[0].blocker.release.set()
    assert {made.choose.whoami()[0] for _ in range(8)} == {0, 1, 2, 3}


def test_scatter_sends_the_ith_arguments_to_the_ith_member(group):
    members, made = group
    assert made.scatter.whoami(["a", ("b",), "c", "d"]) == [
        (0, "a"), (1, "b"), (2, "c"), (3, "d")]
    with pytest.raises(ValueError, match="one list of 4 arguments"):
        made.scatter.whoami(["only one"])


def test_indexing_slicing_and_length(group):
    members, made = group
    assert len(made) == 4 and made.names[1] == "member/1"
    assert made[3].whoami("i") == (3, "i")
    assert made[1:3].call.whoami() == [(1, None), (2, None)]
    with pytest.raises(TypeError, match="courier Clients"):
        courier.GroupClient([])


def test_a_call_to_the_group_pickles_its_arguments_once(group, monkeypatch):
    members, made = group
    pickled = []
    original = serialization.dumps_call_arguments

    def counted(method, args, kwargs):
        pickled.append(method)
        return original(method, args, kwargs)

    monkeypatch.setattr(serialization, "dumps_call_arguments", counted)
    made.call.whoami(list(range(1000)))
    made.broadcast.whoami(1)
    assert pickled == ["whoami", "whoami"]


def test_a_group_call_error_travels_whole(group):
    members, made = group
    members[0].fail = True
    with pytest.raises(courier.GroupCallError) as raised:
        made.call.whoami()
    again = pickle.loads(pickle.dumps(raised.value))
    assert again.failed == ["member/0"] and again.results[1:] == [(1, None), (2, None),
                                                                  (3, None)]
    assert isinstance(again.results[0], ValueError) and str(again) == str(raised.value)


def test_a_large_argument_reaches_every_member_whole(group):
    # On a lane it travels through one shared region; in-process and on gRPC, inline.
    members, made = group
    array = np.arange(1 << 17, dtype=np.float64)
    made.call.whoami(array)
    made.broadcast.whoami(array[::-1].copy())
    deadline = time.monotonic() + 10
    while min(len(m.seen) for m in members) < 2 and time.monotonic() < deadline:
        threading.Event().wait(0.01)
    for member in members:
        assert np.array_equal(member.seen[0], array)
        assert np.array_equal(member.seen[1], array[::-1])
