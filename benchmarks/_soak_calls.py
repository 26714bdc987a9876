"""The soak's two ends of a call: the service each server runs, and a client process.

A client process, `python -m benchmarks._soak_calls NAME SEED SECONDS ADDRESS...`, connects
to every server (a ping each), prints `ready`, waits for a line on its stdin, then calls for
SECONDS and prints its counts as one JSON line (soak_courier.py's module doc says what they
are). The service is `SoakService`, served by `_courier_server.py --service`.
"""

from __future__ import annotations

import collections
import json
import sys
import threading
import time
import zlib
from typing import Any

import numpy as np

from launchpad import courier

PAYLOAD_MAX = 1 << 20
ZERO_SHARE = 0.05  # of calls, with an empty payload
LARGE = 64 << 10  # payloads of this size or more go through shared memory
DTYPES = ("uint8", "int32", "int64", "float32", "float64")
WINDOW = 8  # futures in flight per client at most
FUTURE_SHARE = 0.5
# Of calls, the share that start a burst: BURST futures to one server at once, more than a
# stream's thread sends as one message (stream_threads.HALVE_FROM), all settled before going on.
BURST_SHARE = 0.002
BURST = 40
CALL_TIMEOUT_S = 60.0  # a call unanswered this long is lost


class SoakService:
    """What each server serves: every payload transformed deterministically, and a bitmap per
    client of the calls (sequence numbers) it has executed."""

    def __init__(self):
        self._lock = threading.Lock()
        self._executed: dict[str, bytearray] = {}
        self._duplicates: collections.Counter = collections.Counter()

    def ping(self) -> str:
        return "pong"

    def transform(self, client: str, seq: int, payload: Any) -> tuple:
        """(client, seq, crc32 of payload, payload reversed), noting that seq ran."""
        with self._lock:
            bits = self._executed.setdefault(client, bytearray())
            byte, bit = divmod(seq, 8)
            if byte >= len(bits):
                bits.extend(bytes(max(byte + 1 - len(bits), len(bits))))
            if bits[byte] >> bit & 1:
                self._duplicates[client] += 1
            bits[byte] |= 1 << bit
        if isinstance(payload, np.ndarray):
            return client, seq, zlib.crc32(payload), np.ascontiguousarray(payload[::-1])
        return client, seq, zlib.crc32(payload), payload[::-1]

    def executions(self) -> dict[str, tuple[bytes, int]]:
        """client -> (its bitmap of executed calls, how many ran again)."""
        with self._lock:
            return {client: (bytes(bits), self._duplicates[client])
                    for client, bits in self._executed.items()}


class Payloads:
    """Random payloads of 0 B to 1 MiB (log-scale sizes), bytes or arrays: slices of pools
    of random data made once."""

    def __init__(self, rng: np.random.Generator):
        self._rng = rng
        self._bytes = rng.bytes(2 * PAYLOAD_MAX)
        self._arrays = {dtype: (rng.random(2 * PAYLOAD_MAX // np.dtype(dtype).itemsize, dtype)
                                if dtype.startswith("float")
                                else np.frombuffer(rng.bytes(2 * PAYLOAD_MAX), dtype))
                        for dtype in DTYPES}

    def draw(self) -> bytes | np.ndarray:
        rng = self._rng
        size = 0 if rng.random() < ZERO_SHARE else round(2 ** rng.uniform(0, 20))
        kind = int(rng.integers(len(DTYPES) + 1))
        if kind == len(DTYPES):
            start = int(rng.integers(PAYLOAD_MAX))
            return self._bytes[start:start + size]
        pool = self._arrays[DTYPES[kind]]
        count = size // pool.itemsize
        start = int(rng.integers(len(pool) - count + 1))
        return pool[start:start + count]


def _size(payload: bytes | np.ndarray) -> int:
    return payload.nbytes if isinstance(payload, np.ndarray) else len(payload)


def is_right(reply: Any, client: str, seq: int, payload: bytes | np.ndarray) -> bool:
    """Whether `reply` is SoakService.transform's answer to this very call."""
    if not isinstance(reply, tuple) or len(reply) != 4:
        return False
    got_client, got_seq, crc, body = reply
    if got_client != client or got_seq != seq or crc != zlib.crc32(payload):
        return False
    if isinstance(payload, np.ndarray):
        return (isinstance(body, np.ndarray) and body.dtype == payload.dtype
                and body.shape == payload.shape and np.array_equal(body[::-1], payload))
    return isinstance(body, bytes) and body == payload[::-1]


class Calls:
    """One client process's calls and their outcomes; connected to every server once made."""

    def __init__(self, name: str, addresses: list[str], seed: int):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.payloads = Payloads(self.rng)
        self.clients = [courier.Client(address, call_timeout=CALL_TIMEOUT_S)
                        for address in addresses]
        for client in self.clients:
            client.ping()
        self.counts = collections.Counter()
        self.first_error = ""
        self.first_lost = ""

    def settle(self, seq: int, payload: Any, outcome) -> None:
        """Checks one call's answer (`outcome()` returns it or raises)."""
        try:
            reply = outcome()
        except TimeoutError:
            self.counts["lost"] += 1
            self.first_lost = self.first_lost or (
                f"call {seq}: {type(payload).__name__} of {_size(payload)} bytes")
            return
        except Exception as e:  # noqa: BLE001 - every error is counted and the first named
            self.counts["errors"] += 1
            self.first_error = self.first_error or f"{type(e).__name__}: {e}"
            return
        if not is_right(reply, self.name, seq, payload):
            self.counts["wrong"] += 1
            return
        self.counts["answered"] += 1
        self.counts["payload_bytes"] += 2 * _size(payload)

    def run(self, seconds: float) -> dict[str, Any]:
        """Calls for `seconds`; returns the counts."""
        began = time.perf_counter()
        deadline = began + seconds
        pending: collections.deque = collections.deque()
        seq = 0
        while time.perf_counter() < deadline:
            payload = self._draw()
            client = self.clients[int(self.rng.integers(len(self.clients)))]
            if self.rng.random() < BURST_SHARE:
                seq = self._burst(client, seq, payload)
                continue
            if self.rng.random() < FUTURE_SHARE:
                self.counts["futures"] += 1
                pending.append((seq, payload, client.futures.transform(self.name, seq, payload)))
                if len(pending) >= WINDOW:
                    self._settle_future(*pending.popleft())
            else:
                self.counts["sync"] += 1
                self.settle(seq, payload,
                            lambda c=client, s=seq, p=payload: c.transform(self.name, s, p))
            seq += 1
        while pending:
            self._settle_future(*pending.popleft())
        elapsed = time.perf_counter() - began
        transports = sorted({courier.transport_of(client) for client in self.clients})
        for client in self.clients:
            courier.close(client)
        return {"client": self.name, "calls": seq, "seconds": round(elapsed, 3),
                "transports": transports, "first_error": self.first_error,
                "first_lost": self.first_lost, **self.counts}

    def _draw(self) -> bytes | np.ndarray:
        """A payload, counted by its size class."""
        payload = self.payloads.draw()
        size = _size(payload)
        self.counts["empty" if size == 0 else "large" if size >= LARGE else "small"] += 1
        return payload

    def _burst(self, client: courier.Client, seq: int, first: Any) -> int:
        """BURST futures to `client` at once (the first with `first`, drawn already),
        settled in order; returns the next sequence number."""
        self.counts["bursts"] += 1
        burst = []
        for k in range(BURST):
            payload = first if k == 0 else self._draw()
            self.counts["futures"] += 1
            burst.append((seq + k, payload,
                          client.futures.transform(self.name, seq + k, payload)))
        for call in burst:
            self._settle_future(*call)
        return seq + BURST

    def _settle_future(self, seq: int, payload: Any, future) -> None:
        self.settle(seq, payload, lambda: future.result(timeout=CALL_TIMEOUT_S))


def main(argv: list[str]) -> None:
    if len(argv) < 4:
        sys.exit("usage: python -m benchmarks._soak_calls NAME SEED SECONDS ADDRESS...")
    name, seed, seconds, addresses = argv[0], int(argv[1]), float(argv[2]), argv[3:]
    calls = Calls(name, addresses, seed)
    print("ready", flush=True)
    if not sys.stdin.readline():
        sys.exit(f"soak client {name}: stdin closed before the start")
    print(json.dumps(calls.run(seconds)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
