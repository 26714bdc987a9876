"""`batched_handler`: concurrent single calls served by one call on a stacked batch."""

from __future__ import annotations

import collections
import concurrent.futures
import datetime
import threading
import time

import numpy as np
import pytest

from launchpad import courier
from launchpad.courier import batched_handler

pytestmark = [pytest.mark.timeout(30), pytest.mark.usefixtures("courier_transport")]

Point = collections.namedtuple("Point", ["x", "y"])

# Long enough that a batch which should fill by size never runs early because of the timer.
FILL_TIMEOUT = 10.0


class Doubler:
    """Records the shape of every batch it sees; each caller gets its row doubled."""

    def __init__(self):
        self.batch_shapes: list[tuple] = []

    @batched_handler(batch_size=4, timeout=FILL_TIMEOUT)
    def double(self, x):
        self.batch_shapes.append(x.shape)
        return x * 2


class ShortTimeout:
    def __init__(self):
        self.batch_shapes: list[tuple] = []

    @batched_handler(batch_size=4, timeout=0.05)
    def double(self, x):
        self.batch_shapes.append(x.shape)
        return x * 2

    @batched_handler(batch_size=4, timeout=datetime.timedelta(milliseconds=50), pad_batch=True)
    def padded(self, x):
        self.batch_shapes.append(x.shape)
        return x + 1


class Nested:
    def __init__(self):
        self.seen: list = []

    @batched_handler(batch_size=2, timeout=FILL_TIMEOUT)
    def step(self, obs, pair, point, nothing=None):
        self.seen.append((type(obs), obs["a"].shape, obs["b"].shape, type(pair),
                          pair[0].shape, type(point), point.x.shape, nothing))
        return {
            "total": obs["a"].sum(axis=1) + obs["b"],
            "pair": (pair[1], pair[0]),
            "point": Point(point.x * 10, point.y),
            "nothing": None,
        }


class Failing:
    @batched_handler(batch_size=2, timeout=FILL_TIMEOUT)
    def fail(self, x):
        raise ValueError(f"batch of {len(x)} failed")


class BadResults:
    @batched_handler(batch_size=1, timeout=0.05)
    def scalar(self, x):
        return float(np.sum(x))

    @batched_handler(batch_size=2, timeout=FILL_TIMEOUT)
    def too_short(self, x):
        return x[:1]


class Parallel:
    """Each batch (of one) waits at a barrier of two: it passes only if two batches overlap."""

    def __init__(self):
        self.barrier = threading.Barrier(2, timeout=3)

    @batched_handler(batch_size=1, max_parallelism=2, timeout=FILL_TIMEOUT)
    def meet(self, x):
        self.barrier.wait()
        return x


module_batches: list[tuple] = []


@batched_handler(batch_size=3, timeout=FILL_TIMEOUT)
def module_level_square(x):
    module_batches.append(x.shape)
    return x ** 2


def _run_concurrently(fn, arguments, timeout=10.0):
    """Calls fn(argument) from one thread per argument; returns the results in order."""
    with concurrent.futures.ThreadPoolExecutor(len(arguments)) as pool:
        return list(pool.map(fn, arguments, timeout=timeout))


# --- Over courier ---

def test_full_batch_runs_once_and_each_caller_gets_its_own_row(serve, connect):
    obj = Doubler()
    client = connect(serve(obj))
    futures = [client.futures.double(np.full(3, i, np.float32)) for i in range(4)]
    results = [f.result(timeout=5) for f in futures]
    for i, result in enumerate(results):
        np.testing.assert_array_equal(result, np.full(3, 2 * i, np.float32))
    assert obj.batch_shapes == [(4, 3)]


def test_batched_method_is_listed(serve, connect):
    assert "double" in courier.list_methods(connect(serve(Doubler())))


def test_partial_batch_runs_after_the_timeout(serve, connect):
    obj = ShortTimeout()
    client = connect(serve(obj))
    started = time.monotonic()
    result = client.double(np.arange(3))
    assert time.monotonic() - started < 2
    np.testing.assert_array_equal(result, np.arange(3) * 2)
    assert obj.batch_shapes == [(1, 3)]


def test_pad_batch_pads_to_batch_size_and_caller_gets_its_own_result(serve, connect):
    obj = ShortTimeout()
    client = connect(serve(obj))
    result = client.padded(np.array([5.0, 6.0]))
    np.testing.assert_array_equal(result, [6.0, 7.0])
    assert obj.batch_shapes == [(4, 2)]


def test_nested_arguments_are_stacked_per_leaf_and_results_unstacked(serve, connect):
    obj = Nested()
    client = connect(serve(obj))
    futures = [
        client.futures.step({"a": np.full(3, i), "b": i}, (np.array([i]), np.array([-i])),
                            point=Point(x=np.float32(i), y=np.array([i, i])))
        for i in (1, 2)
    ]
    results = [f.result(timeout=5) for f in futures]
    assert obj.seen == [(dict, (2, 3), (2,), tuple, (2, 1), Point, (2,), None)]
    for i, result in zip((1, 2), results, strict=True):
        assert set(result) == {"total", "pair", "point", "nothing"}
        assert result["total"] == 3 * i + i
        assert isinstance(result["pair"], tuple)
        np.testing.assert_array_equal(result["pair"][0], [-i])
        np.testing.assert_array_equal(result["pair"][1], [i])
        assert isinstance(result["point"], Point)
        assert result["point"].x == 10 * i
        np.testing.assert_array_equal(result["point"].y, [i, i])
        assert result["nothing"] is None


def test_raising_batched_function_gives_every_caller_the_exception(serve, connect):
    client = connect(serve(Failing()))
    futures = [client.futures.fail(np.array(i)) for i in range(2)]
    for future in futures:
        error = future.exception(timeout=5)
        assert isinstance(error, ValueError), repr(error)
        assert "batch of 2 failed" in str(error)


@pytest.mark.timeout(15)
def test_no_deadlock_with_one_server_thread_and_four_concurrent_callers(serve, connect):
    obj = Doubler()
    client = connect(serve(obj, thread_pool_size=1))
    futures = [client.futures.double(np.array([i])) for i in range(4)]
    done, not_done = concurrent.futures.wait(futures, timeout=5)
    assert not not_done, "batch never filled: waiting callers held the only server thread"
    assert [int(f.result()[0]) for f in futures] == [0, 2, 4, 6]
    assert obj.batch_shapes == [(4, 1)]


def test_max_parallelism_two_runs_two_batches_at_once(serve, connect):
    client = connect(serve(Parallel()))
    futures = [client.futures.meet(np.array(i)) for i in range(2)]
    assert [int(f.result(timeout=5)) for f in futures] == [0, 1]


def test_scalar_result_leaf_raises_value_error_about_leading_batch_axis(serve, connect):
    client = connect(serve(BadResults()))
    with pytest.raises(ValueError, match="leading batch axis"):
        client.scalar(np.arange(3))


def test_result_with_wrong_leading_size_raises_value_error(serve, connect):
    client = connect(serve(BadResults()))
    futures = [client.futures.too_short(np.array([i])) for i in range(2)]
    for future in futures:
        with pytest.raises(ValueError, match="leading batch axis of size 2"):
            future.result(timeout=5)


# --- Called directly ---

def test_direct_call_blocks_and_returns_the_result():
    obj = ShortTimeout()
    np.testing.assert_array_equal(obj.double(np.array([1, 2])), [2, 4])
    assert obj.batch_shapes == [(1, 2)]


def test_direct_concurrent_calls_form_one_batch():
    obj = Doubler()
    results = _run_concurrently(lambda i: obj.double(np.array([i])), list(range(4)))
    assert [int(r[0]) for r in results] == [0, 2, 4, 6]
    assert obj.batch_shapes == [(4, 1)]


def test_direct_call_of_failing_batch_raises_the_exception():
    obj = Failing()
    results = _run_concurrently(lambda i: _error_of(obj.fail, np.array(i)), [0, 1])
    assert all(isinstance(e, ValueError) for e in results), results


def _error_of(fn, *args):
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - the test inspects whatever was raised
        return e
    return None


def test_module_level_function_is_batched():
    module_batches.clear()
    results = _run_concurrently(module_level_square, [np.array(i) for i in (1, 2, 3)])
    assert [int(r) for r in results] == [1, 4, 9]
    assert module_batches == [(3,)]


def test_each_instance_batches_its_own_calls():
    first, second = Doubler(), Doubler()
    calls = [(first, i) for i in range(4)] + [(second, i) for i in range(4)]
    results = _run_concurrently(lambda c: int(c[0].double(np.array(c[1]))), calls)
    assert results == [0, 2, 4, 6, 0, 2, 4, 6]
    assert first.batch_shapes == [(4,)]
    assert second.batch_shapes == [(4,)]


# --- Arguments of the decorator ---

@pytest.mark.parametrize("kwargs", [
    {"batch_size": 0},
    {"batch_size": -1},
    {"batch_size": 2.0},
    {"batch_size": 2, "max_parallelism": 0},
    {"batch_size": 2, "timeout": -1},
    {"batch_size": 2, "timeout": datetime.timedelta(seconds=-1)},
    {"batch_size": 2, "timeout": "soon"},
])
def test_invalid_arguments_raise_value_error(kwargs):
    with pytest.raises(ValueError):
        batched_handler(**kwargs)
