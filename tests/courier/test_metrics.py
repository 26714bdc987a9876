"""A courier server's call metrics: what each answered call adds to its method's counters."""

from __future__ import annotations

import concurrent.futures
import threading

import pytest

from launchpad import courier
from launchpad.courier import _histogram, metrics

pytestmark = [pytest.mark.timeout(30), pytest.mark.usefixtures("courier_transport")]


class Service:
    def __init__(self):
        self.pending: list[concurrent.futures.Future] = []
        self.called = threading.Event()

    def echo(self, x):
        return x

    def fail(self):
        raise ValueError("on purpose")

    def later(self):
        future: concurrent.futures.Future = concurrent.futures.Future()
        self.pending.append(future)
        self.called.set()
        return future


@pytest.fixture
def served():
    service = Service()
    server = courier.Server(service)
    server.start()
    client = courier.Client(server.address)
    yield service, server, client
    courier.close(client)
    server.stop()


def test_calls_errors_and_unknown_methods_are_counted_by_method(served):
    _, server, client = served
    for i in range(5):
        assert client.echo(i) == i
    with pytest.raises(ValueError):
        client.fail()
    with pytest.raises(courier.UnknownMethodError):
        client.no_such_method()
    counts = server.metrics.snapshot()
    assert (counts["echo"].calls, counts["echo"].errors) == (5, 0)
    assert (counts["fail"].calls, counts["fail"].errors) == (1, 1)
    assert (counts[metrics.UNKNOWN_METHOD].calls,
            counts[metrics.UNKNOWN_METHOD].errors) == (1, 1)
    assert "no_such_method" not in counts  # a client cannot grow the table
    assert sum(counts["echo"].buckets.values()) == 5
    assert counts["echo"].total_secs > 0


def test_a_method_answering_with_a_future_is_counted_when_it_completes(served):
    service, server, client = served
    reply = client.futures.later()
    assert service.called.wait(10)
    assert "later" not in server.metrics.snapshot()
    service.pending[0].set_exception(RuntimeError("late failure"))
    with pytest.raises(RuntimeError):
        reply.result(10)
    later = server.metrics.snapshot()["later"]
    assert (later.calls, later.errors) == (1, 1)


def test_durations_fall_in_their_buckets_and_percentiles_read_them():
    counter = metrics.CallMetrics()
    for _ in range(90):
        counter.record("m", 20e-6, False)
    for _ in range(10):
        counter.record("m", 0.3, False)
    counter.record("n", 1e6, True)  # slower than every bound: the last bucket
    counts = counter.snapshot()
    m = counts["m"]
    assert m.buckets == {_histogram.bucket_of(20e-6): 90, _histogram.bucket_of(0.3): 10}
    assert m.percentile(0.5) == pytest.approx(20e-6, rel=0.032)
    assert m.percentile(0.9) == pytest.approx(20e-6, rel=0.032)
    assert m.percentile(0.95) == pytest.approx(0.3, rel=0.032)
    assert counts["n"].buckets == {_histogram.LAST_BUCKET: 1}
    assert counts["n"].percentile(0.5) == _histogram.MAX_SECS
    assert metrics.MethodCounts().percentile(0.5) is None
    with pytest.raises(ValueError, match="fraction"):
        m.percentile(0)


def test_servers_snapshots_sum_and_differences_give_the_calls_between():
    first, second = metrics.CallMetrics(), metrics.CallMetrics()
    first.record("m", 1e-3, False)
    earlier = first.snapshot()["m"]
    first.record("m", 1e-3, True)
    second.record("m", 1e-3, False)
    second.record("other", 1e-3, False)
    total = metrics.summed([first.snapshot(), second.snapshot()])
    assert (total["m"].calls, total["m"].errors, total["other"].calls) == (3, 1, 1)
    since = first.snapshot()["m"].minus(earlier)
    assert (since.calls, since.errors, sum(since.buckets.values())) == (1, 1, 1)
