"""Blocking calls of many threads sharing one client: at most `MAX_DRIVEN` are driven on
streams of their own; the others travel together, as futures do, and none waits for another.
A driven call ends at once when its client is closed."""

import concurrent.futures
import threading

import pytest

from launchpad import courier
from launchpad.courier._connection import connection
from tests.courier.conftest import TOKEN

pytestmark = [pytest.mark.timeout(30), pytest.mark.usefixtures("socket_transport")]

_THREADS = 8


class _Gathering:
    """A method that returns only once `expected` calls are inside it at the same time."""

    def __init__(self, expected: int):
        self._expected = expected
        self._inside = 0
        self._all_in = threading.Event()
        self._lock = threading.Lock()

    def ping(self) -> str:
        return "pong"

    def meet(self, index: int) -> int:
        with self._lock:
            self._inside += 1
            if self._inside == self._expected:
                self._all_in.set()
        if not self._all_in.wait(20):
            raise TimeoutError(f"only {self._inside} of {self._expected} calls came in")
        return index


def _count_driven(monkeypatch) -> list[int]:
    """Spies on Connection._drive: returns [driven now, most driven at once]."""
    counts = [0, 0]
    lock = threading.Lock()
    drive = connection.Connection._drive

    def counted(self, *args):
        with lock:
            counts[0] += 1
            counts[1] = max(counts)
        try:
            return drive(self, *args)
        finally:
            with lock:
                counts[0] -= 1

    monkeypatch.setattr(connection.Connection, "_drive", counted)
    return counts


def test_blocking_calls_past_max_driven_travel_together_and_all_run_at_once(
        serve, connect, monkeypatch):
    client = connect(serve(_Gathering(_THREADS), token=TOKEN), token=TOKEN)
    assert client.ping() == "pong"  # connected: a first call is queued until then
    counts = _count_driven(monkeypatch)
    results: list = [None] * _THREADS

    def call(index: int) -> None:
        results[index] = client.meet(index)

    # The gathering needs every call inside at once: a call queued behind a driven one (or
    # behind another queued one) would never come in, and the calls would time out.
    client_threads = [threading.Thread(target=call, args=(i,)) for i in range(_THREADS)]
    for thread in client_threads:
        thread.start()
    for thread in client_threads:
        thread.join(25)
    assert results == list(range(_THREADS))
    assert counts[1] == connection.MAX_DRIVEN  # (all 8 are driven without the cap)


def test_close_fails_a_driven_call_in_flight_at_once(client, service):
    """(In process, a blocking call runs the method on its caller's own thread, so it returns
    with the method: only streams between processes are closed under a call.)"""
    failed: concurrent.futures.Future = concurrent.futures.Future()

    def call() -> None:
        try:
            client.block()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            failed.set_result(e)
        else:
            failed.set_result(None)

    caller = threading.Thread(target=call)
    caller.start()
    try:
        assert service.blocker.entered.wait(5)
        courier.close(client)
        # Before the server's call returns (it blocks for 10 s): the caller stops waiting.
        assert isinstance(failed.result(timeout=5), courier.ClientClosedError)
    finally:
        service.blocker.release.set()
        caller.join(10)
