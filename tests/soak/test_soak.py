"""The courier soak (benchmarks/soak_courier.py), short: 2 client processes for 3 s against 2
server processes; every call answered once with its right value, nothing left running."""

import numpy as np

from benchmarks import soak_courier
from benchmarks._soak_calls import SoakService, is_right
from benchmarks.soak_courier import exactness

NONE_WRONG = {"lost": 0, "wrong": 0, "duplicate": 0, "errors": 0, "not_executed": 0}


def test_every_call_of_a_short_soak_is_answered_once_with_its_value(no_leaked_processes,
                                                                     no_leaked_threads):
    report = soak_courier.run(clients=2, servers=2, seconds=3, seed=1)
    assert report["exactness"] == NONE_WRONG, report["per_client"]
    assert len(report["per_client"]) == 2
    for client in report["per_client"]:
        assert client["calls"] > 0
        assert client["answered"] == client["calls"]
        assert client["sync"] > 0 and client["futures"] > 0
        assert client["empty"] > 0 and client["small"] > 0 and client["large"] > 0
    assert [server["peak_mib"] > 0 for server in report["server_memory"]] == [True, True]


def test_the_checks_catch_a_wrong_answer_a_repeat_and_a_call_never_run():
    first, second = SoakService(), SoakService()
    array, data = np.arange(10, dtype=np.int32), b"abc"
    reply = first.transform("c0", 0, array)
    assert is_right(reply, "c0", 0, array)
    assert not is_right(reply, "c0", 1, array)  # another call's answer
    assert not is_right(reply, "c1", 0, array)  # another client's
    assert not is_right((*reply[:3], reply[3] + 1), "c0", 0, array)  # damaged on the way back
    assert not is_right(reply, "c0", 0, array + 1)  # not what was sent
    assert is_right(second.transform("c0", 1, data), "c0", 1, data)
    assert not is_right(second.transform("c0", 1, data), "c0", 1, b"abd")
    assert exactness([{"client": "c0", "calls": 2}],
                     [first.executions(), second.executions()]) == {**NONE_WRONG, "duplicate": 1}
    first.transform("c0", 1, data)  # on both servers now, and call 2 never ran
    assert exactness([{"client": "c0", "calls": 3}],
                     [first.executions(), second.executions()]) == {
                         **NONE_WRONG, "duplicate": 2, "not_executed": 1}
