"""The program chaos.py kills nodes of: work whose every result can be checked at the end.

* `ledger/0` (never killed; no restart policy, so its loss would fail the program): the
  record of confirmed work. Consumer c's items are 0, 1, 2, ... and it confirms each one's
  value in order. The ledger checks every confirmation: the value must be `expected(c, item)`
  and the item the next one of c; an item confirmed again (a confirmation delivered twice)
  is a repeat, an item past the next one a gap, both inconsistencies.
* `producer/*` (restartable): `work(c, item)` -> `expected(c, item)`, after `work_secs` of
  simulated work. They keep no state, so a call repeated after a producer was killed gives
  the same answer: the work is idempotent.
* `consumer/*` (restartable): asks the ledger where to start when it (re)starts, has each
  item worked by a producer (the next producer, when one is gone, until one answers) and
  confirms it; once the ledger says the work is over, it tells the ledger how many items it
  has confirmed and returns, so the program's end is a consistent state to check.

Every node serves `ping() -> pid`: the call that tells when a restarted node answers again.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import launchpad as lp
from launchpad import courier

# What a consumer retries with the next producer: the producer is gone, or not back yet.
RETRIED = (courier.ServerUnavailableError, courier.CallTimeoutError, lp.NodeNotReadyError)
PRODUCER_CALL_TIMEOUT_S = 10.0
_MODULUS = (1 << 61) - 1


def expected(consumer: int, item: int) -> int:
    """The value of consumer `consumer`'s item `item`."""
    return (consumer * 1_000_003 + item) ** 2 % _MODULUS


class Producer:
    def __init__(self, work_secs: float):
        self._work_secs = work_secs

    def ping(self) -> int:
        return os.getpid()

    def work(self, consumer: int, item: int) -> int:
        time.sleep(self._work_secs)  # simulated work, not a synchronisation
        return expected(consumer, item)


class Ledger:
    """The consumers' confirmed work (see the module's doc)."""

    def __init__(self, consumers: int):
        self._lock = threading.Lock()
        self._next = [0] * consumers
        self._reported: dict[int, int] = {}
        self._problems = {"wrong": 0, "repeats": 0, "gaps": 0}
        self._retries = 0
        self._over = False
        self._all_reported = threading.Event()

    def ping(self) -> int:
        return os.getpid()

    def next_item(self, consumer: int) -> int:
        with self._lock:
            return self._next[consumer]

    def confirm(self, consumer: int, item: int, value: int, retries: int) -> bool:
        """Records consumer's item (it took `retries` producer calls that failed); returns
        whether the work is over (the consumer should finish)."""
        with self._lock:
            self._retries += retries
            if value != expected(consumer, item):
                self._problems["wrong"] += 1
            elif item == self._next[consumer]:
                self._next[consumer] += 1
            elif item < self._next[consumer]:
                self._problems["repeats"] += 1
            else:
                self._problems["gaps"] += 1
            return self._over

    def stop_work(self) -> None:
        """From now on confirm() tells consumers to finish."""
        with self._lock:
            self._over = True

    def finished(self, consumer: int, confirmed: int) -> None:
        """Consumer's last word: it has confirmed items 0..confirmed-1."""
        with self._lock:
            self._reported[consumer] = confirmed
            if len(self._reported) == len(self._next):
                self._all_reported.set()

    def result(self, timeout: float) -> dict[str, Any]:
        """Once every consumer has finished (at most `timeout` seconds): what the ledger
        recorded, and what each consumer says it confirmed."""
        if not self._all_reported.wait(timeout):
            raise TimeoutError(f"consumers {self.unfinished()} did not finish in {timeout} s")
        with self._lock:
            return {"confirmed": list(self._next),
                    "reported": [self._reported[c] for c in range(len(self._next))],
                    "retries": self._retries, **self._problems}

    def unfinished(self) -> list[int]:
        with self._lock:
            return [c for c in range(len(self._next)) if c not in self._reported]


class Consumer:
    def __init__(self, index: int, ledger: Any, producers: list):
        self._index = index
        self._ledger = ledger
        self._producers = producers

    def ping(self) -> int:
        return os.getpid()

    def run(self) -> None:
        item = self._ledger.next_item(self._index)
        over = False
        while not over:
            value, retries = self._work(item)
            over = self._ledger.confirm(self._index, item, value, retries)
            item += 1
        self._ledger.finished(self._index, item)

    def _work(self, item: int) -> tuple[int, int]:
        """The item's value from the first producer that answers, and how many failed."""
        failed = 0
        while True:
            producer = self._producers[(self._index + item + failed) % len(self._producers)]
            try:
                return producer.work(self._index, item), failed
            except RETRIED:
                failed += 1


def make_program(producers: int, consumers: int, work_secs: float,
                 restart: lp.RestartPolicy) -> tuple[lp.Program, dict[str, Any]]:
    """The program, and the handle of each node by name ('label/index')."""
    program = lp.Program("chaos")
    ledger = program.add_node(lp.CourierNode(Ledger, consumers), label="ledger")
    with program.group("producer", restart=restart):
        workers = [program.add_node(lp.CourierNode(
            Producer, work_secs,
            courier_client_kwargs={"call_timeout": PRODUCER_CALL_TIMEOUT_S}))
            for _ in range(producers)]
    with program.group("consumer", restart=restart):
        users = [program.add_node(lp.CourierNode(Consumer, index, ledger, workers))
                 for index in range(consumers)]
    handles = {"ledger/0": ledger}
    handles.update({f"producer/{i}": handle for i, handle in enumerate(workers)})
    handles.update({f"consumer/{i}": handle for i, handle in enumerate(users)})
    return program, handles
