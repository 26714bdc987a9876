"""What makes a node's fingerprint (nodes/fingerprint.py) differ, as `apply` compares them."""

import launchpad as lp
from launchpad.nodes import fingerprint


class Worker:
    def __init__(self, greeting):
        self.greeting = greeting


class Watcher:
    def __init__(self, workers):
        self.workers = workers


def _watcher_of(size: int, follows: bool, greeting: str = "hi") -> str:
    program = lp.Program("p")
    with program.group("worker"):
        handles = [program.add_node(lp.CourierNode(Worker, greeting)) for _ in range(size)]
    workers = program.group_handle("worker") if follows else lp.GroupHandle(handles)
    watcher = program.add_node(lp.CourierNode(Watcher, workers), label="watcher")
    return fingerprint.fingerprint(watcher._node)


def test_a_handle_that_follows_its_group_is_the_same_whatever_the_groups_size():
    assert _watcher_of(2, follows=True) == _watcher_of(5, follows=True)
    assert _watcher_of(2, follows=True) == _watcher_of(2, follows=True, greeting="other")


def test_a_handle_of_given_members_differs_with_them():
    assert _watcher_of(2, follows=False) != _watcher_of(3, follows=False)
    assert _watcher_of(2, follows=False) != _watcher_of(2, follows=True)
