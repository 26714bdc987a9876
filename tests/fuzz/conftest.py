"""The fuzz suite's settings and fixtures: hypothesis profiles, servers, a good caller.

Profiles (`LAUNCHPAD_FUZZ_PROFILE`): "ci", the default and what `make test` runs, runs each
target's own small number of examples, derandomized (the same ones every run, so a failure
reproduces), without a deadline (a loaded 2-core machine) and without an example database;
"long" (benchmarks/fuzz_courier.py) runs `LONG_FACTOR` times as many, drawn afresh.

`target(examples)` goes under `@given` on every fuzz test: it sets the test's examples under
the profile and counts the cases it runs (`CASES`, read by the benchmark).

The courier fixtures (`serve`, `connect`, ...) are tests/courier's own; `good_caller(server,
transport)` is a client that keeps calling the server under attack from a thread of its own,
on that transport, for as long as the test runs: `check()` asserts every call was answered.
"""

from __future__ import annotations

import collections
import functools
import os
import threading
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, settings

from launchpad import courier
from tests.courier.conftest import TOKEN, connect, serve  # noqa: F401 - fixtures

PROFILE_ENV = "LAUNCHPAD_FUZZ_PROFILE"
FACTOR_ENV = "LAUNCHPAD_FUZZ_FACTOR"
LONG_FACTOR = int(os.environ.get(FACTOR_ENV, "50"))
_COMMON = {"deadline": None, "database": None,
           # One server serves every example of a test: that it keeps serving is the point.
           "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                     HealthCheck.data_too_large]}
settings.register_profile("ci", derandomize=True, **_COMMON)
settings.register_profile("long", **_COMMON)
PROFILE = os.environ.get(PROFILE_ENV, "ci")
settings.load_profile(PROFILE)

CASES: collections.Counter = collections.Counter()  # "module::test" -> cases run


def target(examples: int) -> Callable:
    """Under `@given`: `examples` cases under the ci profile (LONG_FACTOR times as many under
    the long one), each counted in CASES."""
    def decorate(test: Callable) -> Callable:
        name = f"{test.__module__.rsplit('.', 1)[-1]}::{test.__name__}"

        @functools.wraps(test)
        def counted(*args, **kwargs):
            CASES[name] += 1
            return test(*args, **kwargs)

        scaled = examples if PROFILE == "ci" else examples * LONG_FACTOR
        return settings(max_examples=scaled)(counted)

    return decorate


class Echo:
    """What the fuzzed servers serve: nothing that blocks."""

    def ping(self):
        return "pong"

    def identity(self, value):
        return value


class GoodCaller:
    """A client of `address` calling it every few milliseconds from its own thread."""

    PAUSE_SECS = 0.005  # a pace, not a synchronisation: the calls need not be back to back

    def __init__(self, address: str, transport: str):
        self._client = courier.Client(address, token=TOKEN, transport=transport,
                                      call_timeout=10.0)
        self.transport = transport
        self.answered = 0
        self.failures: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fuzz-good-caller", daemon=True)
        assert self._client.ping() == "pong"  # connected before the attack begins
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.PAUSE_SECS):
            try:
                assert self._client.identity(self.answered) == self.answered
                self.answered += 1
            except BaseException as e:  # noqa: BLE001 - every failure is the test's
                self.failures.append(e)

    def check(self) -> None:
        """Asserts no call of the good caller failed, and that one more is answered, on the
        transport it was made for."""
        assert not self.failures, f"the good caller failed: {self.failures[:3]!r}"
        assert self._client.ping() == "pong"
        assert courier.transport_of(self._client) == {"auto": "in-process"}.get(self.transport,
                                                                    self.transport)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        courier.close(self._client)


@pytest.fixture
def good_caller():
    """Factory: `good_caller(server, transport)`; each is checked and closed at the end."""
    callers: list[GoodCaller] = []

    def make(server: courier.Server, transport: str) -> GoodCaller:
        callers.append(GoodCaller(server.address, transport))
        return callers[-1]

    yield make
    try:
        for caller in callers:
            caller.check()
    finally:
        for caller in callers:
            caller.close()


@pytest.fixture
def thread_failures(monkeypatch):
    """The exceptions that ended threads during the test (threading.excepthook's)."""
    failures: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: failures.append(args.exc_value))
    return failures
