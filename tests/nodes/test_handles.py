"""Handles nested anywhere in a node's arguments become clients; Deferred builds in place."""

import collections
import dataclasses
import pickle

import pytest

import launchpad as lp
from launchpad.nodes.base import Handle
from launchpad.nodes.dereference import dereference_all


class _FakeHandle(Handle):
    """A handle whose client is a marker, so the walk can be checked without a program."""

    def __init__(self, tag):
        self.tag = tag

    def dereference(self):
        return ("client", self.tag)


Pair = collections.namedtuple("Pair", "left right")


@dataclasses.dataclass
class Config:
    learner: object
    rate: float = 0.1


@dataclasses.dataclass(frozen=True)
class Frozen:
    learner: object


def test_handles_in_nested_containers_are_dereferenced():
    value = {"list": [_FakeHandle(1)], "tuple": (_FakeHandle(2), 3),
             "pair": Pair(_FakeHandle(3), "x"), "set": frozenset({4})}
    result = dereference_all(value)
    assert result["list"] == [("client", 1)]
    assert result["tuple"] == (("client", 2), 3)
    assert result["pair"] == Pair(("client", 3), "x") and isinstance(result["pair"], Pair)
    assert result["set"] == frozenset({4})


def test_handles_in_dataclasses_are_dereferenced_without_touching_the_original():
    config = Config(_FakeHandle("l"))
    result = dereference_all(config)
    assert result.learner == ("client", "l") and result.rate == 0.1
    assert isinstance(config.learner, _FakeHandle)
    assert dereference_all(Frozen(_FakeHandle("f"))).learner == ("client", "f")


def test_dict_subclasses_keep_their_type_and_settings():
    value = collections.defaultdict(list, {"a": _FakeHandle(1)})
    result = dereference_all(value)
    assert isinstance(result, collections.defaultdict) and result["a"] == ("client", 1)
    assert result["missing"] == []


def test_deferred_is_built_with_dereferenced_arguments():
    deferred = lp.Deferred(lambda a, b: (a, b), _FakeHandle(1), b=[_FakeHandle(2)])
    assert dereference_all({"x": deferred}) == {"x": (("client", 1), [("client", 2)])}


def test_deferred_needs_a_callable():
    with pytest.raises(TypeError, match="callable"):
        lp.Deferred(42)


def test_handle_of_a_pynode_cannot_be_dereferenced_and_says_why():
    program = lp.Program("p")
    handle = program.add_node(lp.PyNode(print), label="printer")
    with pytest.raises(TypeError, match="printer/0.*serves no methods"):
        handle.dereference()


def test_courier_handle_before_launch_explains_when_it_works():
    program = lp.Program("p")
    handle = program.add_node(lp.CourierNode(dict), label="d")
    with pytest.raises(RuntimeError, match="after lp.launch"):
        handle.dereference()


def test_handle_pickles_without_its_program():
    program = lp.Program("p")
    handle = program.add_node(lp.CourierNode(dict), label="d")
    copy = pickle.loads(pickle.dumps(handle))
    assert copy.node_name == "d/0" and copy._node is None


def test_handle_made_before_its_node_is_added_reads_its_place_when_used():
    node = lp.CourierNode(dict)
    handle = node.create_handle()
    with pytest.raises(ValueError, match="the node is in no program"):
        pickle.dumps(handle)
    program = lp.Program("p")
    program.add_node(node, label="late")
    assert pickle.loads(pickle.dumps(handle)).node_name == "late/0"
