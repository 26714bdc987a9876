"""Launchpad's node API: its parameter names, the hooks custom nodes use (courier_address,
reverb_address, set_courier_server, a run() of their own), and what its code reads of nodes
and handles."""

from __future__ import annotations

import concurrent.futures
import threading

import pytest

import launchpad as lp
from launchpad import courier as our_courier
from tests.launch.helpers import TIMEOUT


def _report(box, **kwargs):
    box.put(kwargs)


class _Keeper:
    def __init__(self, **kwargs):
        self.kwargs = kwargs

    def get(self):
        return self.kwargs


def test_a_users_keywords_named_fn_or_cls_reach_the_function(launch, box):
    results = box()
    program = lp.Program("p")
    program.add_node(lp.PyNode(_report, results, fn=1, cls=2), label="py")
    keeper = program.add_node(lp.CourierNode(_Keeper, fn=3, cls=4), label="keeper")
    launch(program)
    assert results.get() == {"fn": 1, "cls": 2}
    assert keeper.dereference().get() == {"fn": 3, "cls": 4}


def test_the_function_and_constructor_may_be_given_by_launchpads_keywords():
    assert lp.PyNode(function=int).runs() == "int"
    assert lp.PyClassNode(constructor=dict).runs() == "dict"
    assert lp.CourierNode(constructor=dict).runs() == "dict"


class _Resolver:
    def __init__(self, address, box):
        self._address, self._box = address, box

    def run(self):
        self._box.put(self._address.resolve())


def test_a_courier_nodes_address_resolves_to_its_server(launch, box):
    results = box()
    program = lp.Program("p")
    server = lp.CourierNode(_Keeper, answer=42)
    program.add_node(server, label="server")
    program.add_node(lp.PyClassNode(_Resolver, server.courier_address, results), label="r")
    launch(program)
    client = our_courier.Client(results.get(), token=lp.context.current().token)
    assert client.get() == {"answer": 42}


class _OwnRun(lp.PyNode):
    """A node type of the user's, which overrides run() without calling Launchpad's."""

    def __init__(self, box):
        super().__init__(int)
        self.web = self.allocate_address("web")
        self._box = box

    def run(self):
        self._box.put(("own", self.web.resolve()))
        lp.wait_for_stop()  # serving (a peer resolves its address meanwhile)


def test_a_node_whose_run_is_its_own_still_has_its_addresses_registered(launch, box):
    results = box()
    node = _OwnRun(results)
    program = lp.Program("p")
    program.add_node(node, label="own")
    program.add_node(lp.PyClassNode(_Resolver, node.web, results), label="peer")
    launch(program)
    first, second = results.get(), results.get()
    own = first if isinstance(first, tuple) else second
    peer = second if isinstance(first, tuple) else first
    assert own == ("own", peer)


class _ServesWhenStarted:
    """Takes its courier server and starts it only when told (Launchpad's hook)."""

    def __init__(self):
        self._server = None
        self._go = threading.Event()

    def set_courier_server(self, server):
        self._server = server

    def ping(self):
        return "pong"

    def start_serving(self):  # a method no call can reach before Start(): see the test
        return "unreachable"

    def run(self):
        self._go.wait(TIMEOUT)
        self._server.Start()
        lp.wait_for_stop()

    def go(self):
        self._go.set()


def test_set_courier_server_hands_the_object_its_server_which_answers_once_started(
        no_leaked_threads, request):
    program = lp.Program("p")
    node = lp.CourierNode(_ServesWhenStarted)
    handle = program.add_node(node, label="manual")
    lp.launch(program, launch_type="test_mt", test_case=request, serialize_py_nodes=False)
    client = handle.dereference()
    early = client.futures.ping()
    assert concurrent.futures.wait([early], timeout=0.5).not_done == {early}
    node._instance.go()  # the object of this thread-run node, as the test's own
    assert early.result(TIMEOUT) == "pong"
    assert "set_courier_server" not in lp.list_methods(client)


def _returns_nothing():
    return None


def test_a_courier_node_whose_constructor_returns_nothing_serves_no_method(launch):
    program = lp.Program("p")
    handle = program.add_node(lp.CourierNode(_returns_nothing), label="nothing")
    launch(program)
    with pytest.raises(our_courier.UnknownMethodError, match="method anything not found"):
        handle.dereference().anything()


def test_courier_options_of_launchpad_are_taken(launch):
    program = lp.Program("p")
    handle = program.add_node(lp.CourierNode(
        _Keeper, courier_kwargs={"thread_pool_size": 2},
        courier_client_kwargs={"chunk_tensors": True, "load_balancing_policy": "round_robin",
                               "call_timeout": 5}), label="keeper")
    launch(program)
    assert handle.dereference().get() == {}
    handle.set_client_kwargs(call_timeout=7, compress=True)
    assert handle.dereference().get() == {}
    with pytest.raises(ValueError, match="Unknown courier_client_kwargs option"):
        handle.set_client_kwargs(timeout=1)


def test_a_method_called_on_a_handle_says_to_dereference_it():
    program = lp.Program("p")
    handle = program.add_node(lp.CourierNode(_Keeper), label="keeper")
    with pytest.raises(AttributeError, match="handle.dereference"):
        handle.get()


def test_launchpads_views_of_a_node_input_handles_and_its_object():
    program = lp.Program("p")
    source = program.add_node(lp.CourierNode(_Keeper), label="source")
    node = lp.PyClassNode(_Keeper, other=[source])
    assert node.input_handles == [source] and node._input_handles == [source]
    assert lp.PyClassNode(_Keeper, a=1)._construct_instance().get() == {"a": 1}


def _launch_type_of_my_context(box):
    launch_context = lp.context.get_context()
    box.put(launch_context.launch_type.value)
    launch_context.program_stopper()  # stops the program, as Launchpad's did
    lp.wait_for_stop()


def test_a_nodes_launch_context_names_its_launch_type_and_stops_its_program(launch, box):
    results = box()
    program = lp.Program("p")
    program.add_node(lp.PyNode(_launch_type_of_my_context, results), label="asks")
    controller = launch(program)
    assert results.get() == launch.launch_type
    assert controller.wait(timeout=TIMEOUT)


def test_get_context_outside_a_node_is_an_error():
    with pytest.raises(lp.context.NoContextError):
        lp.context.get_context()
