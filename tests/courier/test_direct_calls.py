"""Direct calls (direct_calls.py): a blocking call to a server of this process runs on the
caller's thread straight into the server, with no message, and with the semantics of any
other call - values copied (those that cannot change passed as they are), exceptions as the
wire brings them, counted in the server's metrics, in its context, waited for by its stop."""

from __future__ import annotations

import concurrent.futures
import contextvars
import multiprocessing
import threading

import numpy as np
import pytest

from launchpad import courier
from launchpad.courier import errors, metrics
from launchpad.courier._wire import serialization
from tests.courier.conftest import TOKEN, Blocker

pytestmark = pytest.mark.timeout(60)
_WHO = contextvars.ContextVar("who", default="nobody")


class Unpicklable:
    def __reduce__(self):
        raise TypeError("not this one")


class Service:
    def __init__(self):
        self.kept = None
        self.blocker = Blocker()
        self.asked = threading.Event()
        self.pending: concurrent.futures.Future | None = None

    def keep(self, value):
        self.kept = value
        return value

    def append(self, values):
        values.append("server")
        return values

    def kept_list(self):
        return self.kept

    def thread_and_context(self):
        return threading.get_ident(), _WHO.get()

    def fail(self):
        raise KeyError("on purpose")

    def unpicklable(self):
        return Unpicklable()

    def block(self):
        self.blocker.block()
        return "released"

    def later(self):
        self.pending = concurrent.futures.Future()
        self.asked.set()
        return self.pending

    def answer(self, value):
        self.pending.set_result(value)
        return "answered"


@pytest.fixture
def served():
    """A server of this process, started in a context of its own, and a client of it."""
    service = Service()
    server = courier.Server(service, token=TOKEN)
    contextvars.copy_context().run(lambda: (_WHO.set("the server"), server.start()))
    # (transport="auto": whatever transport a run forces for the rest, e.g. gRPC for all)
    client = courier.Client(server.address, token=TOKEN, connect_timeout=2, transport="auto")
    try:
        assert client.keep(0) == 0 and courier.transport_of(client) == "in-process"
        yield service, server, client
    finally:
        service.blocker.release.set()
        courier.close(client)
        server.stop()


def test_a_blocking_call_sends_no_message_and_runs_on_the_callers_thread(served, monkeypatch):
    service, server, client = served
    sent = []
    original = serialization.message_chunks
    monkeypatch.setattr(serialization, "message_chunks",
                        lambda *a, **k: sent.append(1) or original(*a, **k))
    assert client.thread_and_context() == (threading.get_ident(), "the server")
    assert not sent
    assert client.futures.keep(1).result(10) == 1 and sent  # a future still travels


def test_values_are_copied_unless_they_cannot_change(served):
    service, server, client = served
    mine = ["client"]
    assert client.append(mine) == ["client", "server"] and mine == ["client"]
    returned = client.keep(["kept"])
    returned.append("changed by the caller")
    assert client.kept_list() == ["kept"]
    array = np.arange(10.0)
    received = client.keep(array)
    assert np.array_equal(received, array) and not received.flags.writeable
    assert not np.shares_memory(received, array) and not np.shares_memory(service.kept, array)
    text = ("a string", (1, 2.5, None, b"bytes"))
    assert client.keep(text) is text and service.kept is text  # its own copy


def test_failures_come_back_as_the_wire_brings_them(served):
    service, server, client = served
    with pytest.raises(KeyError, match="on purpose") as raised:
        client.fail()
    assert isinstance(raised.value.__cause__, errors.RemoteTraceback)
    assert 'raise KeyError("on purpose")' in str(raised.value.__cause__)
    with pytest.raises(errors.SerializationError, match="result of 'unpicklable'"):
        client.unpicklable()
    with pytest.raises(errors.SerializationError, match="positional argument 0"):
        client.keep(Unpicklable())
    with pytest.raises(errors.UnknownMethodError, match="no_such"):
        client.no_such()
    counts = server.metrics.snapshot()
    assert (counts["fail"].calls, counts["fail"].errors) == (1, 1)
    assert counts[metrics.UNKNOWN_METHOD].errors == 1
    assert counts["keep"].calls == 1  # (its unpicklable argument never reached the server)


def test_a_stop_waits_for_a_direct_call_under_way(served):
    service, server, client = served
    results = []
    caller = threading.Thread(target=lambda: results.append(client.block()))
    caller.start()
    assert service.blocker.entered.wait(10)
    stopper = threading.Thread(target=server.stop, kwargs={"grace": 30})
    stopper.start()
    stopper.join(0.2)  # bounded: it must still wait for the call
    assert stopper.is_alive()
    service.blocker.release.set()
    stopper.join(10)
    caller.join(10)
    assert results == ["released"] and not stopper.is_alive()


def test_a_stopped_server_is_called_the_usual_way(served):
    service, server, client = served
    server.stop()
    with pytest.raises(courier.ServerUnavailableError):
        courier.Client(server.address, token=TOKEN, connect_timeout=0.5).keep(1)
    with pytest.raises(courier.ServerUnavailableError):
        client.keep(1)


def test_a_wrong_token_and_a_deadline_take_the_usual_way(served):
    service, server, client = served
    with pytest.raises(courier.PermissionDeniedError):
        courier.Client(server.address, token="wrong", connect_timeout=2,
                       transport="auto").keep(1)
    timed = courier.Client(server.address, token=TOKEN, call_timeout=10, transport="auto")
    try:
        timed.keep(1)
        thread, _ = timed.thread_and_context()
        assert thread != threading.get_ident()  # a server's thread: the deadline can end it
    finally:
        courier.close(timed)


def _call_after_the_fork(client, results) -> None:
    results.put((client.keep(2), courier.transport_of(client)))


def test_a_client_forked_with_its_process_reaches_the_parents_server_not_its_copy(served):
    service, server, client = served
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_call_after_the_fork, args=(client, results))
    child.start()
    try:
        assert results.get(timeout=30) == (2, "local")
    finally:
        child.join(timeout=30)
    assert service.kept == 2  # the parent's object answered, through a socket


def test_a_call_answered_with_a_future_holds_no_call_slot_while_it_waits():
    service = Service()
    server = courier.Server(service, thread_pool_size=1)  # one call slot
    server.start()
    client = courier.Client(server.address, connect_timeout=2, transport="auto")
    try:
        assert client.keep(0) == 0 and courier.transport_of(client) == "in-process"
        results = []
        caller = threading.Thread(target=lambda: results.append(client.later()))
        caller.start()
        assert service.asked.wait(10)
        assert client.answer(7) == "answered"  # the one slot is free meanwhile
        caller.join(10)
        assert results == [7]
        assert server.metrics.snapshot()["later"].calls == 1
    finally:
        courier.close(client)
        server.stop()
