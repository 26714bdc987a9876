"""The controller protocol's calls, of any type and any value, from a caller with the token.

A real Controller (its own courier server, registry, supervisor and node book) of a program
whose nodes never start is called with each method of the protocol (control.py), every
argument of the type the protocol gives it or of another, with nodes the program has or not
(negative and huge indices, long text), samples of any content, log offsets and lengths of
any size, resolve timeouts of any kind (NaN, infinite, beyond what a timer takes), and too
few or too many arguments. Then:

* a call with an argument of another type, or with too few or too many, gets a TypeError;
  one naming a node the program does not have, an UnknownNodeError; every call an answer or
  an error of its own, within seconds;
* after each, the controller still answers: hello, and a status that renders as the node
  table (one bad report once broke every status after it);
* no thread of the controller dies (a resolve whose timeout a timer could not take once
  killed its timer, and its caller waited for an answer that never came).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import launchpad as lp
from launchpad import control, courier, telemetry
from launchpad.courier import latency_histogram
from launchpad.courier.metrics import MethodCounts
from launchpad.launch.runtime import errors, status_text
from launchpad.launch.runtime.terminals import NodeOutput
from tests.fuzz import wire
from tests.fuzz.conftest import target

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("no_leaked_threads")]

ANSWER_WITHIN_SECS = 15.0
NODES = {("worker", 0), ("worker", 1), ("other", 0)}
# The protocol (control.py): each method's parameters and the type each takes. Those whose
# first two are label and index name a node, which the program must have.
NODE = [("label", str), ("index", int)]
PROTOCOL = {
    "hello": [("version", int)],
    "register": NODE + [("name", str), ("address", str), ("host_id", str)],
    "resolve": NODE + [("name", str), ("timeout", float)],
    "host_of": [("label", str), ("index", int), ("name", str)],
    "node_started": NODE + [("instance", str), ("host", str), ("pid", int),
                            ("heartbeats", bool)],
    "heartbeat": NODE + [("instance", str)],
    "node_finished": NODE + [("instance", str)],
    "node_failed": NODE + [("instance", str), ("reason", str), ("traceback", str),
                           ("exception", bytes)],
    "exit_codes": [],
    "restarts": [],
    "status": [],
    "report": NODE + [("instance", str), ("sample", telemetry.NodeSample)],
    "read_log": NODE + [("offset", int), ("max_bytes", int)],
    "heartbeats": [("runs", list)],
    "reports": [("samples", list)],
}
CHECKS_NODE = {name for name, parameters in PROTOCOL.items()
               if parameters[:2] == NODE and name != "host_of"}


def _nothing() -> None:
    pass


class _Logs:
    """Where read_log finds every node's output (terminals.py's part of it)."""

    def __init__(self, path):
        self._path = path

    def log_of(self, name: str) -> str:
        return str(self._path)

    def writing(self, name: str) -> bool:
        return False


@pytest.fixture
def controller(tmp_path):
    program = lp.Program("fuzzed")
    for label, _ in sorted(NODES):
        program.add_node(lp.PyNode(_nothing), label=label)
    log = tmp_path / "node.log"
    log.write_bytes(b"what the node wrote\n" * 100)
    controller = lp.Controller(program, output=NodeOutput(str(tmp_path), _Logs(log), None))
    yield controller
    controller.kill()
    assert controller.wait(timeout=30)


@pytest.fixture
def caller(controller):
    client = courier.Client(controller.address, token=controller.token, call_timeout=10.0)
    yield client
    courier.close(client)


def _of_type(value, declared: type) -> bool:
    """Whether `value` is of the type the protocol declares (a bool is no int; an int is a
    float, as in Python's annotations)."""
    if isinstance(value, bool) and declared is not bool:
        return False
    return isinstance(value, (int, float) if declared is float else declared)


_counts = st.builds(
    MethodCounts,
    st.one_of(st.integers(0, 100), st.integers(), wire.values),
    st.one_of(st.integers(0, 100), wire.values),
    st.one_of(st.floats(0, 10), st.floats(), wire.values),
    st.one_of(st.dictionaries(st.integers(0, latency_histogram.LAST_BUCKET),
                              st.integers(0, 100), max_size=3),
              st.dictionaries(st.integers(), st.integers(), max_size=3),
              st.just({latency_histogram.LAST_BUCKET + 1: 1}), st.lists(st.integers(), max_size=3),
              wire.values))
_samples = st.builds(
    telemetry.NodeSample,
    st.one_of(st.none(), st.floats(0, 1e6), st.floats(), st.integers(), wire.values),
    st.one_of(st.none(), st.integers(0, 1 << 40), st.integers(), wire.values),
    st.one_of(st.dictionaries(st.text(max_size=5), _counts, max_size=2), wire.values),
    st.one_of(st.floats(0, 2e9), st.floats(), st.integers(-(10 ** 30), 10 ** 30), wire.values),
    st.one_of(st.dictionaries(st.text(max_size=5), st.integers(), max_size=2), wire.values))
# Values of each type the protocol takes: the telling ones, and any.
_OF_TYPE = {
    str: st.one_of(st.sampled_from(["worker", "other", "", "run"]), st.text(max_size=30),
                   st.just("x" * 100_000)),
    int: st.one_of(st.sampled_from([0, 1, -1, 3]), st.integers(),
                   st.integers(-(1 << 80), 1 << 80)),
    float: st.one_of(st.floats(), st.sampled_from([0.0, 0.01, math.inf, math.nan, 1e300]),
                     st.integers(-10, 10 ** 30)),
    bool: st.booleans(),
    bytes: st.one_of(st.binary(max_size=30), st.just(control.pickle_exception(
        ValueError("of the node")))),
    telemetry.NodeSample: _samples,
}
_ANY = st.one_of(wire.values, _samples, st.tuples(st.integers(), st.text(max_size=3)))
_LABELS = st.one_of(st.sampled_from(["worker", "other"]), st.text(max_size=5))
_INDICES = st.one_of(st.sampled_from([0, 1]), st.integers())
# A batched call's entries (heartbeats, reports): well formed or not, of nodes or not.
_OF_TYPE[list] = st.lists(st.one_of(
    st.lists(st.one_of(_LABELS, _INDICES, st.text(max_size=5)), max_size=4),
    st.tuples(_LABELS, _INDICES, st.text(max_size=5)),
    st.tuples(_LABELS, _INDICES, st.text(max_size=5), _samples), _ANY), max_size=4)


@st.composite
def calls(draw) -> tuple[str, list]:
    """A method and its arguments: each of its type (mostly) or of another, all of them or
    one too few or too many."""
    method = draw(st.sampled_from(sorted(PROTOCOL)))
    arguments = []
    for _, declared in PROTOCOL[method]:
        if draw(st.integers(0, 5)):
            arguments.append(draw(_OF_TYPE[declared]))
        else:
            arguments.append(draw(_ANY.filter(lambda value, d=declared: not _of_type(value, d))))
    arity = draw(st.sampled_from(["all"] * 8 + ["fewer", "more"]))
    if arity == "fewer" and arguments:
        arguments.pop()
    elif arity == "more":
        arguments.append(draw(wire.values))
    return method, arguments


def _outcome(future):
    try:
        return future.result(timeout=ANSWER_WITHIN_SECS)
    except TimeoutError:
        pytest.fail(f"no answer within {ANSWER_WITHIN_SECS:g} s")
    except Exception as e:  # noqa: BLE001 - the call's own error, looked at by the test
        return e


@given(call=calls())
# What once left a thread dead or the status broken for every caller after it.
@example(call=("resolve", ["worker", 0, "later", "5"]))
@example(call=("resolve", ["worker", 1, "later", 1e300]))
@example(call=("node_started", ["worker", 0, "run", ["a host"], "a pid", "yes"]))
@example(call=("report", ["other", 0, "", telemetry.NodeSample(1.0, 1, {"m": 5}, 1.0)]))
@example(call=("report", ["other", 0, "", telemetry.NodeSample("1", 1, {}, "now")]))
@example(call=("heartbeats", [[("worker", 0, "run"), ("nobody", 0, "run")]]))
@example(call=("reports", [[("worker", 0, "run", telemetry.NodeSample(1.0, 1, {}, 1.0)),
                            ("worker", 1, "run", "not a sample")]]))
@target(150)
def test_every_call_gets_its_answer_or_its_error_and_the_controller_keeps_serving(
        controller, caller, thread_failures, call):
    thread_failures.clear()  # (one example's failure is not the next one's)
    method, arguments = call
    parameters = PROTOCOL[method]
    future = getattr(caller.futures, method)(*arguments)
    well_typed = len(arguments) == len(parameters) and all(
        _of_type(value, declared)
        for value, (_, declared) in zip(arguments, parameters, strict=True))
    if method == "resolve" and well_typed and tuple(arguments[:2]) in NODES:
        # What it waits for comes: its address (it fails at once if its timeout is NaN).
        caller.register(*arguments[:3], "127.0.0.1:1", "")
    outcome = _outcome(future)
    assert not isinstance(outcome, courier.CourierError), outcome  # the call went through
    if not well_typed:
        assert isinstance(outcome, TypeError), outcome
    elif method in CHECKS_NODE and tuple(arguments[:2]) not in NODES:
        assert isinstance(outcome, errors.UnknownNodeError), outcome
        assert "has no node" in str(outcome)
    elif method == "resolve" and isinstance(arguments[3], float) and math.isnan(arguments[3]):
        assert isinstance(outcome, ValueError), outcome
    elif method == "read_log" and not isinstance(outcome, Exception):
        data, more = outcome
        assert isinstance(data, bytes) and len(data) <= 1 << 20 and isinstance(more, bool)
    status = caller.status()
    assert isinstance(status, telemetry.ProgramStatus)
    assert status_text.render(status)
    assert caller.hello(3) == 3
    assert not thread_failures, thread_failures
