"""in_flight.BlockingCall: what a blocking call comes to, settled once by whoever comes first."""

from __future__ import annotations

import concurrent.futures
import threading

import pytest

from launchpad.courier._connection.in_flight import BlockingCall, settle

pytestmark = pytest.mark.timeout(30)


def test_its_result_waits_for_a_settle_from_another_thread():
    call = BlockingCall()
    assert not call.done()
    settler = threading.Timer(0.05, settle, args=(call, "answer"))
    settler.start()
    assert call.result() == "answer"
    assert call.done()
    assert call.result() == "answer"  # (again: the lock was let go)
    settler.join()


def test_its_exception_is_raised():
    call = BlockingCall()
    settle(call, exception=KeyError("missing"))
    with pytest.raises(KeyError, match="missing"):
        call.result()


def test_the_first_settle_wins_and_a_later_one_is_refused():
    call = BlockingCall()
    call.set_exception(TimeoutError("first"))
    with pytest.raises(concurrent.futures.InvalidStateError):
        call.set_result("second")
    settle(call, "third")  # (settle ignores a call settled already)
    with pytest.raises(TimeoutError, match="first"):
        call.result()


def _race(call: BlockingCall, start: threading.Barrier, won: list, index: int) -> None:
    start.wait()
    try:
        call.set_result(index)
        won.append(index)
    except concurrent.futures.InvalidStateError:
        pass


def test_of_many_settling_at_once_exactly_one_wins():
    for _ in range(50):
        call, start, won = BlockingCall(), threading.Barrier(8), []
        racers = [threading.Thread(target=_race, args=(call, start, won, i)) for i in range(8)]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join()
        assert len(won) == 1 and call.result() == won[0]
