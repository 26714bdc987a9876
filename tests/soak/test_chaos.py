"""Chaos (benchmarks/chaos.py), short: three SIGKILLs of restartable nodes of a running
local_mp program, which must restart them and end consistent, leaving nothing running."""

from benchmarks import chaos
from benchmarks._chaos_program import Ledger, expected


def test_a_program_absorbs_kills_of_its_restartable_nodes(no_leaked_processes,
                                                          no_leaked_threads):
    report = chaos.run(kills=3, producers=2, consumers=2, interval=(0.05, 0.2), seed=3)
    assert report["consistent"], report["consistency"]
    assert report["kills"] == 3
    assert {name.partition("/")[0] for name in report["kills_by_node"]} == {"producer",
                                                                            "consumer"}
    for kill in report["per_kill"]:
        assert kill["new_pid"] not in (0, kill["pid"])
        assert 0 < kill["running_s"] and 0 < kill["first_call_s"]


def test_the_ledger_counts_a_wrong_value_a_repeat_and_a_gap():
    ledger = Ledger(2)
    assert ledger.confirm(0, 0, expected(0, 0), retries=1) is False
    ledger.confirm(0, 1, expected(0, 1), retries=0)
    ledger.confirm(0, 1, expected(0, 1), retries=0)  # a repeat
    ledger.confirm(1, 0, expected(0, 0), retries=0)  # another consumer's value
    ledger.confirm(1, 2, expected(1, 2), retries=0)  # item 0 and 1 skipped
    assert ledger.next_item(0) == 2 and ledger.next_item(1) == 0
    ledger.stop_work()
    assert ledger.confirm(0, 2, expected(0, 2), retries=0) is True
    ledger.finished(0, 3)
    assert ledger.unfinished() == [1]
    ledger.finished(1, 1)
    assert ledger.result(timeout=1) == {"confirmed": [3, 0], "reported": [3, 1], "retries": 1,
                                        "wrong": 1, "repeats": 1, "gaps": 1}
