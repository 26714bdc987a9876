"""Soak: client processes calling courier servers for a while, every reply checked.

Run: `python -m benchmarks.soak_courier [--clients 8] [--servers 2] [--seconds 60] [--seed 0]`.
Prints one JSON object on stdout; progress goes to stderr.

Each server is a process of its own (`_courier_server.py` serving `SoakService`); each client
is a process of its own that, from a common start, calls the servers (one chosen at random per
call) for `--seconds`: half the calls blocking, half through futures (up to `WINDOW` in flight,
settled oldest first, while blocking calls go on beside them). A payload is bytes or a
contiguous numpy array (uint8, int32, int64, float32, float64) of 0 B to 1 MiB, its size drawn
over a log scale (so every size class is hit: small messages, 64 KiB and more through shared
memory), its contents slices of random data.

A call is `transform(client, seq, payload)`; the server answers `(client, seq, crc32 of what
it received, the payload reversed)` and sets bit `seq` of the client's bitmap (a bit already
set is a duplicate execution). The client checks every reply against what it sent. At the end
the servers' bitmaps of each client are joined: every call the client made must have run
exactly once, on one server. The counts reported, all 0 in a sound run:

* lost: calls without an answer (a future that never resolved);
* wrong: answers that fail the check (another call's answer, damaged bytes, a wrong type);
* errors: calls that raised;
* duplicate: calls executed more than once (on one server, or on both);
* not_executed: calls answered but never executed, and executions of calls never made.

Also reported: each client's and the total throughput (calls/s; MiB/s of payload, both
directions together) and each server's resident memory (RSS), sampled every half second: its
value after the warm-up (the first quarter of the run, at most 10 s) and at the end, their
difference (growth) and its peak.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import multiprocessing
import sys
import threading
import time
import zlib
from typing import Any

import numpy as np

from benchmarks.courier_rpc import child_process
from launchpad import courier

PAYLOAD_MAX = 1 << 20
ZERO_SHARE = 0.05  # of calls, with an empty payload
DTYPES = ("uint8", "int32", "int64", "float32", "float64")
WINDOW = 8  # futures in flight per client at most
FUTURE_SHARE = 0.5
CALL_TIMEOUT_S = 60.0  # a call unanswered this long is lost
START_TIMEOUT_S = 120.0  # for every client to be connected and ready
SAMPLE_EVERY_S = 0.5
WARMUP_SHARE, WARMUP_MAX_S = 0.25, 10.0
MIB = 1 << 20
LARGE = 64 << 10  # payloads of this size or more go through shared memory


def log(message: str) -> None:
    print(f"[soak_courier] {message}", file=sys.stderr, flush=True)


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


class _Calls:
    """One client process's calls and their outcomes."""

    def __init__(self, name: str, addresses: list[str], seed: int):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.payloads = Payloads(self.rng)
        self.clients = [courier.Client(address, call_timeout=CALL_TIMEOUT_S)
                        for address in addresses]
        self.counts = collections.Counter()
        self.first_error = ""

    def settle(self, seq: int, payload: Any, outcome) -> None:
        """Checks one call's answer (`outcome()` returns it or raises)."""
        try:
            reply = outcome()
        except TimeoutError:
            self.counts["lost"] += 1
            return
        except Exception as e:  # noqa: BLE001 - every error is counted and the first named
            self.counts["errors"] += 1
            self.first_error = self.first_error or f"{type(e).__name__}: {e}"
            return
        if not is_right(reply, self.name, seq, payload):
            self.counts["wrong"] += 1
            return
        self.counts["answered"] += 1
        self.counts["payload_bytes"] += 2 * (payload.nbytes if isinstance(payload, np.ndarray)
                                             else len(payload))

    def run(self, seconds: float, start: Any) -> dict[str, Any]:
        for client in self.clients:
            client.ping()
        start.wait(START_TIMEOUT_S)
        began = time.perf_counter()
        deadline = began + seconds
        pending: collections.deque = collections.deque()
        seq = 0
        while time.perf_counter() < deadline:
            payload = self.payloads.draw()
            size = payload.nbytes if isinstance(payload, np.ndarray) else len(payload)
            self.counts["empty" if size == 0 else "large" if size >= LARGE else "small"] += 1
            client = self.clients[int(self.rng.integers(len(self.clients)))]
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
        transports = sorted({client.transport for client in self.clients})
        for client in self.clients:
            client.close()
        return {"client": self.name, "calls": seq, "seconds": round(elapsed, 3),
                "transports": transports, "first_error": self.first_error, **self.counts}

    def _settle_future(self, seq: int, payload: Any, future) -> None:
        self.settle(seq, payload, lambda: future.result(timeout=CALL_TIMEOUT_S))


def client_main(name: str, addresses: list[str], seconds: float, seed: int, start: Any,
                results: Any) -> None:
    """A client process: its calls from `start` (a barrier) on; its counts into `results`."""
    try:
        results.put(_Calls(name, addresses, seed).run(seconds, start))
    except BaseException as e:
        start.abort()
        results.put({"client": name, "crashed": f"{type(e).__name__}: {e}"})
        raise


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def _sample(pids: list[int], samples: list, done: threading.Event, began: float) -> None:
    while not done.wait(SAMPLE_EVERY_S):
        samples.append((time.perf_counter() - began, [_rss_mib(pid) for pid in pids]))


def memory_report(samples: list, seconds: float) -> list[dict[str, Any]]:
    """Each server's RSS after the warm-up, at the end, the growth between and the peak."""
    warmup = min(WARMUP_MAX_S, WARMUP_SHARE * seconds)
    after = [rss for at, rss in samples if at >= warmup] or [samples[-1][1]]
    report = []
    for server in range(len(samples[0][1])):
        series = [rss[server] for rss in after]
        report.append({"server": server, "warmup_s": warmup,
                       "rss_after_warmup_mib": round(series[0], 1),
                       "rss_end_mib": round(series[-1], 1),
                       "growth_mib": round(series[-1] - series[0], 1),
                       "peak_mib": round(max(rss[server] for _, rss in samples), 1)})
    return report


def _executions(addresses: list[str]) -> list[dict[str, tuple[bytes, int]]]:
    found = []
    for address in addresses:
        client = courier.Client(address, call_timeout=CALL_TIMEOUT_S)
        try:
            found.append(client.executions())
        finally:
            client.close()
    return found


def exactness(clients: list[dict[str, Any]],
              executions: list[dict[str, tuple[bytes, int]]]) -> dict[str, int]:
    """The counts of calls that went wrong, from the clients' reports and the servers'
    bitmaps (see the module's doc)."""
    counts = collections.Counter()
    for report in clients:
        for key in ("lost", "wrong", "errors"):
            counts[key] += report.get(key, 0)
        bitmaps = [int.from_bytes(server.get(report["client"], (b"", 0))[0], "little")
                   for server in executions]
        ran = 0
        for bits in bitmaps:
            counts["duplicate"] += (ran & bits).bit_count()
            ran |= bits
        counts["duplicate"] += sum(server.get(report["client"], (b"", 0))[1]
                                   for server in executions)
        made = (1 << report["calls"]) - 1
        counts["not_executed"] += (made & ~ran).bit_count() + (ran & ~made).bit_count()
    return {key: counts[key] for key in ("lost", "wrong", "duplicate", "errors",
                                         "not_executed")}


def _throughput(report: dict[str, Any]) -> dict[str, Any]:
    seconds = report["seconds"]
    return {"calls_per_s": round(report.get("answered", 0) / seconds, 1),
            "mib_per_s": round(report.get("payload_bytes", 0) / MIB / seconds, 1)}


def run(clients: int = 8, servers: int = 2, seconds: float = 60.0,
        seed: int = 0) -> dict[str, Any]:
    """The soak (see the module's doc); returns the report."""
    context = multiprocessing.get_context("spawn")
    argv = [sys.executable, "-m", "benchmarks._courier_server",
            "--service", "benchmarks.soak_courier:SoakService"]
    with contextlib.ExitStack() as stack:
        started = [stack.enter_context(child_process(argv)) for _ in range(servers)]
        pids = [pid for pid, _ in started]
        addresses = [f"127.0.0.1:{port}" for _, port in started]
        start, results = context.Barrier(clients + 1), context.Queue()
        processes = [context.Process(target=client_main, daemon=True,
                                     args=(f"c{i}", addresses, seconds, seed * 1000 + i,
                                           start, results)) for i in range(clients)]
        for process in processes:
            process.start()
            stack.callback(_end, process)
        log(f"{clients} clients and {servers} servers started; waiting for them")
        try:
            start.wait(START_TIMEOUT_S)
        except threading.BrokenBarrierError:
            raise RuntimeError(f"a client process crashed: {results.get(timeout=10)}") from None
        began = time.perf_counter()
        samples = [(0.0, [_rss_mib(pid) for pid in pids])]
        done = threading.Event()
        sampler = threading.Thread(target=_sample, args=(pids, samples, done, began))
        sampler.start()
        try:
            reports = [results.get(timeout=seconds + CALL_TIMEOUT_S + START_TIMEOUT_S)
                       for _ in processes]
        finally:
            done.set()
            sampler.join()
        wall = time.perf_counter() - began
        crashed = [report for report in reports if "crashed" in report]
        if crashed:
            raise RuntimeError(f"client processes crashed: {crashed}")
        executions = _executions(addresses)
    reports.sort(key=lambda report: report["client"])
    answered = sum(report.get("answered", 0) for report in reports)
    moved = sum(report.get("payload_bytes", 0) for report in reports)
    return {
        "benchmark": "soak_courier",
        "clients": clients, "servers": servers, "seconds": seconds, "seed": seed,
        "calls": sum(report["calls"] for report in reports),
        "exactness": exactness(reports, executions),
        "total": {"calls_per_s": round(answered / wall, 1),
                  "mib_per_s": round(moved / MIB / wall, 1)},
        "per_client": [{**report, **_throughput(report)} for report in reports],
        "server_memory": memory_report(samples, seconds),
    }


def _end(process: Any) -> None:
    """Waits for a client process (it ends once it has reported); kills one that hangs."""
    process.join(timeout=30)
    if process.is_alive():
        process.kill()
        process.join()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--servers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.clients < 1 or args.servers < 1 or args.seconds <= 0:
        parser.error("--clients and --servers must be >= 1 and --seconds > 0")
    report = run(args.clients, args.servers, args.seconds, args.seed)
    log(f"exactness {report['exactness']}, total {report['total']}")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
