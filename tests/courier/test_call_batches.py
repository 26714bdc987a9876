"""How a message's calls run (call_batches.py), on each transport between processes' streams:
calls of quick methods one after another on the thread that read the message, others on
workers at once; and a quick method that blocks on another call of its message holds it up
only for INLINE_SECS, never for ever."""

from __future__ import annotations

import threading

import pytest

from launchpad.courier._serving import call_batches
from launchpad.courier._wire import serialization
from launchpad.courier._wire.serialization import Kind
from tests.courier.conftest import TOKEN, open_raw_channel

pytestmark = pytest.mark.timeout(30)


class Recorder:
    """Methods that say which thread ran them; `wait` blocks until `release` runs."""

    def __init__(self):
        self.released = threading.Event()

    def where(self, index):
        return index, threading.get_ident()

    def wait(self):
        released = self.released.wait(10)
        self.released.clear()
        return released

    def release(self):
        self.released.set()
        return True

    def slow_where(self, index):
        threading.Event().wait(2 * call_batches.QUICK_SECS)  # a method that is not quick
        return index, threading.get_ident()


def _message(*calls: tuple) -> list:
    """One message of calls (method, *args), numbered from 1."""
    frames = [serialization.encode_frame(Kind.CALL, number, method,
                                         serialization.dumps_call_arguments(method, args, {}))
              for number, (method, *args) in enumerate(calls, start=1)]
    return [serialization.join_message(frames)]


def _replies(stream, message: list, count: int) -> dict:
    """The results of a message's `count` calls, by number, however many replies carry them."""
    results = {}
    reply = stream.exchange(message)
    while True:
        results.update({f.call_id: f.load() for f in serialization.decode_message(reply)})
        if len(results) == count:
            return results
        reply = stream.receive()


@pytest.fixture(params=["local", "grpc"])
def served(serve, request):
    """A server of a Recorder, and a stream to it on each transport between processes."""
    server = serve(Recorder(), token=TOKEN)
    channel = open_raw_channel(server, request.param)
    opened = channel.open_stream(TOKEN)
    yield server, opened
    opened.finish()
    channel.close()


def _quick(server, method: str) -> bool:
    return server.metrics.is_quick(method, call_batches.QUICK_SECS, 8)


def _until_quick(server, stream, *calls: tuple) -> bool:
    """Makes each of `calls` ((method, *args): one call per message, in order) until the
    server knows their methods all as quick: 8 calls at least, more while a call held up by
    the machine (a preemption of milliseconds, on a loaded one) still weighs on their mean.
    False if 256 rounds do not."""
    for round_ in range(256):
        for call in calls:
            _replies(stream, _message(call), 1)
        if round_ >= 7 and all(_quick(server, call[0]) for call in calls):
            return True
    return False


def test_quick_calls_of_a_message_run_in_order_on_one_thread(served):
    server, stream = served
    assert _until_quick(server, stream, ("where", 0))  # known as quick once it answered so
    results = _replies(stream, _message(*[("where", i) for i in range(16)]), 16)
    assert [results[n][0] for n in range(1, 17)] == list(range(16))
    assert len({thread for _, thread in results.values()}) == 1


def test_calls_of_a_method_not_known_as_quick_run_at_once_on_workers(served):
    server, stream = served
    for _ in range(8):
        _replies(stream, _message(("slow_where", 0)), 1)
    assert not _quick(server, "slow_where")
    results = _replies(stream, _message(*[("slow_where", i) for i in range(4)]), 4)
    assert len({thread for _, thread in results.values()}) > 1


def test_a_quick_method_that_blocks_holds_its_message_up_only_for_a_while(served):
    server, stream = served
    # Each quick: `wait` finds the event `release` set just before.
    assert _until_quick(server, stream, ("release",), ("wait",))
    # Now both run here, `wait` first: `release` is handed to a worker after INLINE_SECS.
    assert _replies(stream, _message(("wait",), ("release",)), 2) == {1: True, 2: True}
