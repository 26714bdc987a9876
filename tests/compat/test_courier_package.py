"""Launchpad's top-level `courier` package: `courier.Server` (functions bound by name,
started and stopped by hand) and `courier.Client`, with the cases of Launchpad's own
client_test.py (which cannot run here: it needs its C++ courier's error type), and the
token they carry in and outside a program."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import textwrap
import threading
import time
from concurrent import futures

import pytest

import courier
import launchpad as lp
from launchpad.courier import errors
from tests.launch.helpers import TIMEOUT
from tests.processes import ROOT


class _A:
    def add(self, a, b):
        return a + b


@pytest.fixture
def server(no_leaked_threads):
    made = courier.Server()
    made.Bind("no_args", lambda: 1000)
    made.Bind("lambda_add", lambda a, b: a + b)
    made.Bind("method_add", _A().add)
    made.Bind("add_default", lambda a, b=100: a + b)
    made.Bind("exception_method", _raise)
    made.Bind("sleep", time.sleep)
    made.Bind("rebind", lambda: 1234)
    made.Bind("bytes_value", lambda: b"1234")
    made.Start()
    yield made
    made.Stop()
    made.Join()


def _raise():
    raise ValueError("Exception method called")


@pytest.fixture
def connect(server):
    """`connect(**options)`: a courier.Client of `server`, closed when the test ends."""
    made = []

    def client(**options):
        made.append(courier.Client(server.address, **options))
        return made[-1]

    yield client
    for client in made:
        lp.courier.close(client)


def test_bound_functions_answer_with_their_arguments_defaults_and_keywords(connect):
    client = connect()
    assert client.lambda_add(12, 5) == 17 and client.method_add(12, 5) == 17
    assert client.no_args() == 1000 and client.add_default(23) == 123
    assert client.add_default(23, b=500) == 523 and client.bytes_value() == b"1234"
    assert client.futures.add_default(23).result(TIMEOUT) == 123


def test_rebinding_and_unbinding_change_what_is_served(server, connect):
    client = connect()
    server.Bind("rebind", lambda: 2345)
    assert client.rebind() == 2345
    server.Unbind("rebind")
    with pytest.raises(errors.UnknownMethodError, match="method rebind not found") as raised:
        client.rebind()
    assert raised.value.code == 5  # NOT_FOUND, as Launchpad's status said
    assert sorted(courier.list_methods(client)) == [
        "add_default", "bytes_value", "exception_method", "lambda_add", "method_add",
        "no_args", "sleep"]


def test_a_remote_exception_keeps_its_type_and_message(connect):
    client = connect()
    with pytest.raises(ValueError, match="Exception method called"):
        client.exception_method()
    with pytest.raises(ValueError, match="Exception method called"):
        client.futures.exception_method().result(TIMEOUT)


@pytest.mark.parametrize("use_futures", [False, True])
def test_a_call_longer_than_the_timeout_is_deadline_exceeded(connect, use_futures):
    client = connect(call_timeout=datetime.timedelta(seconds=0.2))
    assert client.sleep(0.01) is None
    with pytest.raises(errors.CallTimeoutError, match="Deadline Exceeded") as raised:
        if use_futures:
            client.futures.sleep(2).result(TIMEOUT)
        else:
            client.sleep(2)
    assert raised.value.code == 4  # DEADLINE_EXCEEDED (ml-metrics tells timeouts so)


def test_a_future_cancelled_before_its_answer_is_cancelled(connect):
    future = connect().futures.sleep(2)
    assert future.cancel()
    with pytest.raises(futures.CancelledError):
        future.result(TIMEOUT)


def test_a_client_waits_for_a_server_made_but_not_yet_started(no_leaked_threads):
    late = courier.Server()
    client = courier.Client(late.address)
    answer = client.futures.no_args()
    late.Bind("no_args", lambda: 1000)
    assert not late.has_started
    late.Start()
    assert answer.result(TIMEOUT) == 1000
    late.Stop()


def test_a_server_cannot_start_twice_nor_stop_unstarted():
    made = courier.Server()
    with pytest.raises(ValueError, match="not started"):
        made.Stop()
    made.Start()
    with pytest.raises(ValueError, match="already started"):
        made.Start()
    made.Stop()


def test_join_returns_once_the_server_is_stopped(server):
    joined = threading.Event()
    waiter = threading.Thread(target=lambda: (server.Join(), joined.set()))
    waiter.start()
    assert not joined.wait(0.2)
    server.Stop()
    assert joined.wait(TIMEOUT)
    waiter.join(TIMEOUT)


_OTHER_PROCESS = textwrap.dedent("""
    import sys
    import courier
    print(courier.Client(sys.argv[1], call_timeout=20).lambda_add(1, 2))
""")


def _call_from_another_process(address: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _OTHER_PROCESS, address], cwd=ROOT,
                          env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=120)


def test_outside_a_program_only_processes_sharing_the_token_reach_a_server(monkeypatch):
    monkeypatch.setattr(lp.context, "_process_token", None)  # read again, from the variable
    monkeypatch.setattr(lp.context, "_outside", None)
    monkeypatch.setenv(lp.context.TOKEN_VARIABLE, "shared-secret")
    made = courier.Server()
    made.Bind("lambda_add", lambda a, b: a + b)
    made.Start()
    try:
        assert _call_from_another_process(made.address).stdout == "3\n"
        refused = _call_from_another_process(made.address,
                                             LAUNCHPAD_COURIER_TOKEN="another-secret")
        assert refused.returncode != 0 and "PermissionDenied" in refused.stderr
    finally:
        made.Stop()


def _serve_functions(address_box, box):
    server = courier.Server()
    server.Bind("lambda_add", lambda a, b: a + b)
    server.Start()
    address_box.put(server.address)
    lp.wait_for_stop()
    server.Stop()


def _call_it(address_box, box):
    box.put(courier.Client(address_box.get_address()).lambda_add(20, 22))


class _AddressBox:
    """A place a node puts an address and another node reads it (a CourierNode)."""

    def __init__(self):
        self._address = None
        self._set = threading.Event()

    def put(self, address):
        self._address = address
        self._set.set()

    def get_address(self):
        self._set.wait(TIMEOUT)
        return self._address


def test_in_a_program_courier_servers_and_clients_carry_its_token_across_processes(
        launch, box):
    results = box()
    program = lp.Program("p")
    addresses = program.add_node(lp.CourierNode(_AddressBox), label="addresses")
    program.add_node(lp.PyNode(_serve_functions, addresses, results), label="server")
    program.add_node(lp.PyNode(_call_it, addresses, results), label="client")
    launch(program)
    assert results.get() == 42
