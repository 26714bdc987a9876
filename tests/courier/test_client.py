"""Client behaviour: calls, futures, remote errors, timeouts, connections, payloads, pickling."""

from __future__ import annotations

import concurrent.futures
import datetime
import gc
import pickle
import threading
import time
import weakref

import numpy as np
import portpicker
import pytest

from launchpad import courier
from launchpad.courier import errors
from launchpad.courier._connection import connection
from tests.courier.conftest import TOKEN

pytestmark = [pytest.mark.timeout(30), pytest.mark.usefixtures("courier_transport")]


def _unused_address() -> str:
    return f"127.0.0.1:{portpicker.pick_unused_port()}"


# --- Exceptions raised by served methods; module level so the client can rebuild them. ---

class CustomError(Exception):
    """A user-defined exception that pickles and rebuilds."""

    def __init__(self, code):
        super().__init__(f"custom failure {code}")
        self.code = code


class TwoArgError(Exception):
    """Its constructor needs two arguments but stores one message: it cannot be rebuilt."""

    def __init__(self, left, right):
        super().__init__(f"{left} and {right}")


class LockedError(Exception):
    """Holds a lock, so the exception object itself cannot be pickled."""

    def __init__(self):
        super().__init__("holding a lock")
        self.lock = threading.Lock()


class Raiser:
    def raise_custom(self, code):
        raise CustomError(code)

    def raise_two_arg(self):
        raise TwoArgError("left", "right")

    def raise_locked(self):
        raise LockedError()


class WithCallables:
    """Public callables of several kinds, and public attributes that are not callable."""

    def __init__(self):
        self.plus_one = lambda x: x + 1
        self.value = 3

    @staticmethod
    def static_double(x):
        return 2 * x

    @classmethod
    def class_name(cls):
        return cls.__name__

    @property
    def prop(self):
        return "property"


class _RaisesOnUnpickle:
    """Pickles fine, but unpickling it raises (as if its class were missing on that side)."""

    def __reduce__(self):
        return (_fail_to_rebuild, ())


def _fail_to_rebuild():
    raise RuntimeError("cannot rebuild this object here")


class Payload:
    """A result object that can be weakly referenced."""


class BadResult:
    def result_that_fails_to_unpickle(self):
        return _RaisesOnUnpickle()


# --- Calls ---

def test_positional_arguments(client):
    assert client.add(2, 3) == 5


def test_keyword_arguments(client):
    assert client.add(a=2, b=40) == 42
    assert client.echo(1, "two", x=3) == ((1, "two"), {"x": 3})


def test_no_arguments(client):
    assert client.ping() == "pong"


def test_method_returning_none(client):
    assert client.nothing() is None


def test_calling_the_client_calls_remote_dunder_call(client):
    assert client(7) == ("called", 7)
    assert client.futures(8).result(timeout=5) == ("called", 8)


def test_call_by_name(client):
    assert courier.call(client, "add", 1, b=2) == 3


def test_lambda_attribute_staticmethod_and_classmethod_are_served(serve, connect):
    client = connect(serve(WithCallables()))
    assert client.plus_one(1) == 2
    assert client.static_double(21) == 42
    assert client.class_name() == "WithCallables"


def test_property_and_data_attribute_are_not_served(serve, connect):
    client = connect(serve(WithCallables()))
    for name in ("prop", "value"):
        with pytest.raises(courier.UnknownMethodError):
            courier.call(client, name)


# --- Futures ---

def test_futures_returns_a_concurrent_future(client):
    future = client.futures.add(1, 2)
    assert isinstance(future, concurrent.futures.Future)
    assert future.result(timeout=5) == 3


def test_hundred_futures_in_flight_complete_with_their_own_results(client):
    futures = [client.futures.add(i, b=1000) for i in range(100)]
    done, not_done = concurrent.futures.wait(futures, timeout=10)
    assert not not_done
    assert [f.result() for f in futures] == [i + 1000 for i in range(100)]


def test_cancel_of_a_future_whose_call_blocks_returns_true(client, service):
    future = client.futures.block()
    assert service.blocker.entered.wait(5), "the call never reached the server"
    assert future.cancel() is True
    assert future.cancelled()
    service.blocker.release.set()
    # The late reply of the cancelled call is dropped; the client keeps working.
    assert client.ping() == "pong"


def test_future_exception_carries_the_remote_type(client):
    future = client.futures.raise_key_error("absent")
    assert isinstance(future.exception(timeout=5), KeyError)


# --- Method names ---

def test_list_methods_lists_public_methods_and_dunder_call(client):
    methods = courier.list_methods(client)
    for name in ("add", "echo", "ping", "nothing", "block", "identity", "__call__"):
        assert name in methods
    assert not [m for m in methods if m.startswith("_") and m != "__call__"]


def test_list_methods_lists_public_callable_attributes(serve, connect):
    methods = courier.list_methods(connect(serve(WithCallables())))
    assert {"plus_one", "static_double", "class_name"} <= set(methods)
    assert "prop" not in methods and "value" not in methods


def test_list_methods_omits_dunder_call_when_the_object_has_none(serve, connect):
    methods = courier.list_methods(connect(serve(Raiser())))
    assert methods == ["raise_custom", "raise_locked", "raise_two_arg"]


def test_private_name_raises_attribute_error_locally_without_connecting():
    client = courier.Client(_unused_address(), connect_timeout=30)
    try:
        started = time.monotonic()
        with pytest.raises(AttributeError):
            client._private  # noqa: B018 - the attribute access itself must raise
        with pytest.raises(AttributeError):
            client.futures._private  # noqa: B018
        assert time.monotonic() - started < 1
    finally:
        courier.close(client)


def test_unknown_method_error_is_attribute_error_naming_method_and_listing_others(client):
    with pytest.raises(courier.UnknownMethodError) as info:
        client.no_such_method(1)
    assert isinstance(info.value, AttributeError)
    message = str(info.value)
    assert "no_such_method" in message
    assert "add" in message and "echo" in message


# --- Remote exceptions ---

def test_remote_key_error_keeps_its_type_and_args(client):
    with pytest.raises(KeyError) as info:
        client.raise_key_error("missing-key")
    assert info.value.args == ("missing-key",)


def test_remote_value_error_keeps_its_type_and_message(client):
    with pytest.raises(ValueError, match="bad value 17"):
        client.raise_value_error("bad value 17")


def test_remote_traceback_is_the_cause_and_names_the_raising_function(client):
    with pytest.raises(KeyError) as info:
        client.raise_key_error("k")
    cause = info.value.__cause__
    assert isinstance(cause, errors.RemoteTraceback)
    assert "raise_key_error" in cause.traceback_text
    assert "KeyError" in cause.traceback_text
    assert "raise_key_error" in str(cause)


def test_remote_custom_exception_keeps_its_type_and_attributes(serve, connect):
    client = connect(serve(Raiser()))
    with pytest.raises(CustomError) as info:
        client.raise_custom(7)
    assert info.value.code == 7
    assert "custom failure 7" in str(info.value)
    assert "raise_custom" in info.value.__cause__.traceback_text


def test_exception_that_cannot_be_rebuilt_arrives_as_remote_error(serve, connect):
    client = connect(serve(Raiser()))
    with pytest.raises(courier.RemoteError) as info:
        client.raise_two_arg()
    error = info.value
    assert isinstance(error, courier.CourierError)
    assert error.type_name.endswith("TwoArgError")
    assert "left and right" in error.message
    assert "raise_two_arg" in error.remote_traceback
    assert isinstance(error.__cause__, errors.RemoteTraceback)


def test_unpicklable_exception_arrives_as_remote_error(serve, connect):
    client = connect(serve(Raiser()))
    with pytest.raises(courier.RemoteError) as info:
        client.raise_locked()
    assert info.value.type_name.endswith("LockedError")
    assert "holding a lock" in info.value.message
    assert "raise_locked" in info.value.remote_traceback


# --- Call timeouts ---

@pytest.mark.parametrize("call_timeout", [1, 0.3, datetime.timedelta(milliseconds=300)],
                         ids=["int", "float", "timedelta"])
def test_call_timeout_raises_call_timeout_error_in_bounded_time(
        serve, connect, service, call_timeout):
    client = connect(serve(service), call_timeout=call_timeout)
    assert client.ping() == "pong"  # connected: the timing below is the call's alone
    started = time.monotonic()
    with pytest.raises(courier.CallTimeoutError) as info:
        client.block()
    elapsed = time.monotonic() - started
    assert isinstance(info.value, TimeoutError)
    assert "block" in str(info.value)
    assert 0.2 < elapsed < 3


def test_future_with_call_timeout_fails_with_call_timeout_error(serve, connect, service):
    client = connect(serve(service), call_timeout=0.3)
    future = client.futures.block()
    with pytest.raises(courier.CallTimeoutError):
        future.result(timeout=5)


def test_client_works_after_a_call_timed_out(serve, connect, service):
    client = connect(serve(service), call_timeout=0.3)
    with pytest.raises(courier.CallTimeoutError):
        client.block()
    service.blocker.release.set()
    assert client.add(1, 1) == 2


def test_a_timed_out_blocking_call_leaves_no_thread_once_its_client_is_closed(
        serve, connect, service):
    server = serve(service)
    before = set(threading.enumerate())
    client = connect(server, call_timeout=0.3)
    assert client.ping() == "pong"
    with pytest.raises(courier.CallTimeoutError):
        client.block()
    courier.close(client)
    service.blocker.release.set()  # the server answers the call given up
    deadline = time.monotonic() + 10
    left = [t for t in set(threading.enumerate()) - before if t.name == "courier-client"]
    for thread in left:  # each ends by itself: none is left polling its stream for good
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not [t.name for t in left if t.is_alive()]


def test_closing_a_client_that_is_still_connecting_ends_its_threads(no_leaked_threads):
    """The dial ends within its slice (0.5 s), not at its connect_timeout (a minute away):
    the fixture fails the test if any thread it started is alive 10 s after it ends."""
    client = courier.Client(_unused_address(), token="t", connect_timeout=60)
    future = client.futures.ping()  # waits for a server that is not there
    courier.close(client)
    with pytest.raises(courier.ClientClosedError):
        future.result(timeout=5)


def test_a_timed_out_blocking_call_does_not_keep_its_result_alive(serve, connect, service):
    client = connect(serve(service), call_timeout=60)
    result = client.identity(Payload())
    reference = weakref.ref(result)
    del result
    gc.collect()
    assert reference() is None  # the deadline (a minute away) holds no reference to it


@pytest.mark.parametrize("call_timeout,error", [(-1, ValueError), ("1", TypeError)])
def test_invalid_call_timeout_raises_at_construction(call_timeout, error):
    with pytest.raises(error, match="call_timeout"):
        courier.Client("127.0.0.1:1", call_timeout=call_timeout)


def test_invalid_address_raises_type_error():
    with pytest.raises(TypeError):
        courier.Client(1234)


# --- Connections ---

def test_client_created_before_its_server_completes_the_call(serve, connect, service):
    port = portpicker.pick_unused_port()
    client = connect(f"127.0.0.1:{port}", token=TOKEN, connect_timeout=10)
    future = client.futures.add(20, 22)
    serve(service, port=port, token=TOKEN)
    assert future.result(timeout=10) == 42


def test_unreachable_address_raises_server_unavailable_naming_the_address(connect):
    address = _unused_address()
    client = connect(address, connect_timeout=0.5)
    started = time.monotonic()
    with pytest.raises(courier.ServerUnavailableError) as info:
        client.ping()
    assert time.monotonic() - started < 4
    assert isinstance(info.value, ConnectionError)
    assert address in str(info.value)


def test_unreachable_address_without_wait_for_ready_fails_fast(connect):
    address = _unused_address()
    client = connect(address, wait_for_ready=False, connect_timeout=30)
    started = time.monotonic()
    with pytest.raises(courier.ServerUnavailableError) as info:
        client.ping()
    assert time.monotonic() - started < 4
    assert address in str(info.value)


def test_address_resolver_is_asked_for_the_address(server, connect):
    class Resolver:
        def __init__(self):
            self.asked = 0

        def resolve(self, timeout):
            self.asked += 1
            return server.address

    resolver = Resolver()
    client = connect(resolver, token=TOKEN)
    assert client.ping() == "pong"
    # Asked once, or again within the dial while the address did not answer yet (after 10
    # ms: a loaded machine's gRPC channel may take longer to come up); never once connected.
    asked = resolver.asked
    assert asked >= 1
    assert client.ping() == "pong"
    assert resolver.asked == asked
    assert client.address == server.address


def test_a_resolver_giving_a_dead_address_first_is_asked_again_soon(server, connect):
    """As a controller answers just after a node was killed, before it has seen the process
    end: the old address once, then the restarted node's. The client asks again well within
    a connect_timeout shorter than the longest wait between resolutions (0.5 s): it used to
    wait that long on the dead address, so a restarted node answered half a second late."""
    class Resolver:
        def __init__(self):
            self.answers = [_unused_address()]

        def resolve(self, timeout):
            return self.answers.pop() if self.answers else server.address

    client = connect(Resolver(), token=TOKEN, connect_timeout=0.4)
    assert client.ping() == "pong"
    assert client.address == server.address


def test_blocking_calls_run_on_the_calling_thread(client):
    """Once connected, a blocking call is sent and answered on its caller's thread: while no
    more than `MAX_DRIVEN` run at once, no stream thread is started for them (more travel
    together: test_driven_calls.py)."""
    def stream_threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name == "courier-client"}

    assert client.add(0, 1) == 1  # connected (calls made while connecting travel together)
    before = stream_threads()
    with concurrent.futures.ThreadPoolExecutor(connection.MAX_DRIVEN) as pool:
        assert list(pool.map(lambda i: client.add(i, 1), range(40))) == list(range(1, 41))
    assert stream_threads() <= before


def test_concurrent_calls_from_eight_threads_get_their_own_results(client):
    def caller(thread_index):
        return [client.echo(thread_index, i) for i in range(25)]

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(caller, range(8), timeout=20))
    for thread_index, thread_results in enumerate(results):
        assert thread_results == [((thread_index, i), {}) for i in range(25)]


# --- Serialization of arguments and results ---

def test_unpicklable_positional_argument_raises_before_anything_is_sent():
    # No server listens and connect_timeout is long: the error comes from pickling, at once.
    client = courier.Client(_unused_address(), connect_timeout=30)
    try:
        started = time.monotonic()
        with pytest.raises(courier.SerializationError) as info:
            client.identity(1, threading.Lock())
        assert time.monotonic() - started < 2
        assert isinstance(info.value, TypeError)
        assert "identity" in str(info.value)
        assert "positional argument 1" in str(info.value)
    finally:
        courier.close(client)


def test_unpicklable_keyword_argument_is_named(client):
    with pytest.raises(courier.SerializationError) as info:
        client.echo(1, x=threading.Lock())
    assert "keyword argument 'x'" in str(info.value)
    assert "echo" in str(info.value)
    assert client.ping() == "pong"


def test_unpicklable_argument_raises_from_futures_too(client):
    with pytest.raises(courier.SerializationError):
        client.futures.identity(threading.Lock())


def test_unpicklable_result_raises_serialization_error_naming_the_method(client):
    with pytest.raises(courier.SerializationError) as info:
        client.unpicklable_result()
    assert "unpicklable_result" in str(info.value)


def test_result_that_fails_to_unpickle_on_client_raises_serialization_error(serve, connect):
    client = connect(serve(BadResult()))
    with pytest.raises(courier.SerializationError):
        client.result_that_fails_to_unpickle()
    assert "result_that_fails_to_unpickle" in courier.list_methods(client)


@pytest.mark.parametrize("array", [
    np.arange(10, dtype=np.float32),
    np.arange(12, dtype=np.int64).reshape(3, 4),
    np.array(3.5),
    np.arange(100, dtype=np.float64).reshape(10, 10)[::2, 1::3],
    np.zeros((0, 3), dtype=np.int8),
], ids=["1d-float32", "2d-int", "0d", "non-contiguous", "empty"])
def test_numpy_array_round_trip(client, array):
    result = client.identity(array)
    assert result.dtype == array.dtype
    assert result.shape == array.shape
    np.testing.assert_array_equal(result, array)


def test_numpy_array_larger_than_grpc_default_message_size_round_trips(client):
    array = np.random.default_rng(0).random(2 * 1024 * 1024, dtype=np.float32)
    assert array.nbytes == 8 * 1024 * 1024  # twice the 4 MiB gRPC default
    result = client.identity(array)
    np.testing.assert_array_equal(result, array)


def test_received_arrays_are_read_only_views(client):
    result = client.identity(np.arange(1000, dtype=np.float32))
    assert not result.flags.writeable
    copy = result.copy()
    copy[0] = 1.0
    assert copy[0] == 1.0


def test_nested_structure_of_arrays_round_trips(client):
    value = {
        "obs": [np.ones((2, 3), np.float32), np.arange(4)],
        "meta": {"step": 5, "names": ("a", "b"), "mask": np.array([True, False])},
    }
    result = client.identity(value)
    assert set(result) == {"obs", "meta"}
    np.testing.assert_array_equal(result["obs"][0], value["obs"][0])
    np.testing.assert_array_equal(result["obs"][1], value["obs"][1])
    assert result["meta"]["step"] == 5
    assert result["meta"]["names"] == ("a", "b")
    np.testing.assert_array_equal(result["meta"]["mask"], value["meta"]["mask"])


def test_lambda_argument_travels_by_value(client):
    assert client.identity(lambda x: x * 3)(5) == 15


def test_compress_true_round_trips(serve, connect, service, courier_transport):
    # A compressing client of another host stays on gRPC, which compresses; this host's
    # transports send the bytes as they are.
    kind = "grpc" if courier_transport == "tcp" else courier_transport
    client = connect(serve(service, token=TOKEN).address, token=TOKEN, compress=True)
    assert client.add(2, 3) == 5
    array = np.zeros(1024 * 1024, np.float32)
    np.testing.assert_array_equal(client.identity(array), array)
    assert courier.transport_of(client) == kind


# --- Pickling ---

def test_pickled_client_keeps_token_call_timeout_and_compress(serve, connect, service):
    server = serve(service, token=TOKEN)
    original = connect(server, token=TOKEN, call_timeout=0.3, compress=True)
    client = pickle.loads(pickle.dumps(original))
    try:
        assert isinstance(client, courier.Client)
        assert client.address == server.address
        assert client.add(1, 2) == 3  # the token travelled
        with pytest.raises(courier.CallTimeoutError):  # so did call_timeout
            client.block()
    finally:
        courier.close(client)


def test_pickled_client_keeps_connect_timeout():
    original = courier.Client(_unused_address(), connect_timeout=0.5)
    client = pickle.loads(pickle.dumps(original))
    try:
        started = time.monotonic()
        with pytest.raises(courier.ServerUnavailableError):
            client.ping()
        assert time.monotonic() - started < 4  # not the 30 s default
    finally:
        courier.close(client)
        courier.close(original)


def test_pickled_client_keeps_wait_for_ready_false():
    original = courier.Client(_unused_address(), wait_for_ready=False, connect_timeout=30)
    client = pickle.loads(pickle.dumps(original))
    try:
        started = time.monotonic()
        with pytest.raises(courier.ServerUnavailableError):
            client.ping()
        assert time.monotonic() - started < 4
    finally:
        courier.close(client)
        courier.close(original)


def test_client_pickled_after_use_works(client):
    assert client.ping() == "pong"
    copy = pickle.loads(pickle.dumps(client))
    try:
        assert copy.add(3, 4) == 7
    finally:
        courier.close(copy)


# --- Closing ---

def test_calls_after_close_raise_client_closed_error(client):
    assert client.ping() == "pong"
    courier.close(client)
    with pytest.raises(courier.ClientClosedError) as info:
        client.ping()
    assert isinstance(info.value, RuntimeError)


def test_close_twice_is_fine(client):
    courier.close(client)
    courier.close(client)


def test_close_before_any_call_is_fine(connect, server):
    client = connect(server, token=TOKEN)
    courier.close(client)
    with pytest.raises(courier.ClientClosedError):
        client.ping()


def test_close_fails_calls_in_flight_with_client_closed_error(client, service):
    future = client.futures.block()
    assert service.blocker.entered.wait(5)
    courier.close(client)
    assert isinstance(future.exception(timeout=5), courier.ClientClosedError)


def test_a_future_keeps_its_otherwise_unreferenced_client_alive(server):
    future = courier.Client(server.address, token=TOKEN).futures.identity("still answered")
    gc.collect()  # the client is referenced by nothing but its future
    assert future.result(timeout=10) == "still answered"
    courier.close(future.courier_client)


class _EndedNodeResolver:
    """Resolves nothing: as the controller answers for a node that has ended."""

    def resolve(self, timeout):
        raise ConnectionRefusedError("that node has ended")


@pytest.mark.parametrize("wait_for_ready", [True, False])
def test_a_call_through_a_resolver_that_fails_at_once_gets_its_error(wait_for_ready):
    client = courier.Client(_EndedNodeResolver(), wait_for_ready=wait_for_ready)
    for _ in range(20):  # the connection fails before or after the call is queued: both end
        with pytest.raises(ConnectionRefusedError, match="that node has ended"):
            client.anything()
    courier.close(client)


def test_the_calls_travel_on_the_transport_of_this_run(client, courier_transport):
    assert courier.transport_of(client) is None  # not connected yet
    assert client.ping() == "pong"
    assert courier.transport_of(client) == courier_transport
    assert client.futures.add(1, 2).result(timeout=10) == 3
    assert courier.transport_of(client) == courier_transport


def test_an_unknown_transport_option_is_refused_at_construction():
    with pytest.raises(ValueError, match="transport must be one of auto, local, tcp, grpc"):
        courier.Client("127.0.0.1:1", transport="udp")


def test_calls_in_flight_reuse_their_streams(client):
    """Calls kept in flight (16 at a time, each replaced as it completes) travel on a few
    streams reused over and over, never on a new stream per call."""
    window = threading.Semaphore(16)
    futures = []
    for _ in range(2000):
        window.acquire()
        future = client.futures.ping()
        future.add_done_callback(lambda _: window.release())
        futures.append(future)
    assert all(future.result(timeout=30) == "pong" for future in futures)
    assert len(client._slot.connection._pool.streams) <= 17
