"""A node that does not pickle is refused naming the argument at fault, the path inside it,
the type that failed, and the fix (runtime/serialization.py, runtime/unpicklable.py)."""

from __future__ import annotations

import socket
import threading

import pytest

import launchpad as lp
from launchpad.launch.runtime import serialization, unpicklable


class Holder:
    def __init__(self):
        self.config = {"lr": 0.1, "locks": [1, threading.Lock()]}


class Worker:
    def __init__(self, config, holder=None):
        self.holder = holder

    def run(self):
        pass


def refusal(node) -> str:
    with pytest.raises(lp.NodeSerializationError) as raised:
        serialization.pickle_node(node, "worker", "worker/0")
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    return str(raised.value)


def test_the_path_goes_through_attributes_keys_and_positions():
    message = refusal(lp.CourierNode(Worker, {"lr": 1}, Holder()))
    assert message.startswith(
        "The nodes associated to the label 'worker' were not serializable with cloudpickle: "
        "node worker/0 cannot be pickled to run in its own process: its "
        "argument 'holder' holds a _thread.lock at args[1].config['locks'][1], which cannot "
        "be pickled. Make it picklable, or let the node make it where it runs: pass "
        "lp.Deferred(Holder, ...) in its place, which the node calls there.\n"
        "(pickling said: TypeError: cannot pickle '_thread.lock' object)"), message


def test_a_keyword_argument_is_named_by_its_keyword():
    with socket.socket() as sock:
        message = refusal(lp.PyClassNode(Worker, {}, holder=sock))
    assert "its argument 'holder' (kwargs['holder']) is a socket.socket, which cannot be " \
           "pickled. Make it picklable, or let the node make it where it runs: pass " \
           "lp.Deferred(socket.socket, ...)" in message, message


def test_inside_a_container_the_fix_names_the_part_that_fails():
    message = refusal(lp.PyNode(print, [1, {"lock": threading.Lock()}]))
    assert "its argument 1 holds a _thread.lock at args[0][1]['lock']" in message, message
    assert "pass lp.Deferred(_thread.lock, ...)" in message


def test_a_function_closing_over_what_does_not_pickle_is_told_to_make_it_inside():
    lock = threading.Lock()

    def work():
        with lock:
            pass

    message = refusal(lp.PyNode(work))
    assert "its function work holds a _thread.lock at function<closure lock>" in message, message
    assert "Make a _thread.lock where the function runs" in message


def test_under_test_mt_the_message_offers_running_unpickled():
    with pytest.raises(lp.NodeSerializationError) as raised:
        serialization.check_nodes_are_serializable("worker", [lp.PyNode(print, threading.Lock())])
    assert "cannot be pickled to run as a thread of a test_mt launch" in str(raised.value)
    assert "Or pass serialize_py_nodes=False to lp.launch" in str(raised.value)


def test_find_stops_at_the_innermost_part_that_fails():
    lock = threading.Lock()
    assert unpicklable.find({"a": [1, 2], "b": (3, lock)}) == ("['b'][1]", lock)
    assert unpicklable.find(lock) == ("", lock)
