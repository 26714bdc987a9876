"""Soak: client processes calling courier servers for a while, every reply checked.

Run: `python -m benchmarks.soak_courier [--clients 8] [--servers 2] [--seconds 60] [--seed 0]`.
Prints one JSON object on stdout; progress goes to stderr.

Each server is a process of its own (`_courier_server.py` serving `_soak_calls.SoakService`);
each client is a process of its own (`_soak_calls.py`) that, from a common start (once every
client is connected), calls the servers (one chosen at random per call) for `--seconds`: half
the calls blocking, half through futures (up to `WINDOW` in flight, settled oldest first,
while blocking calls go on beside them), and now and then a burst of `BURST` futures to one
server at once (sent as two messages on two streams, stream_threads.HALVE_FROM). A payload is
bytes or a contiguous numpy array (uint8, int32, int64, float32, float64) of 0 B to 1 MiB,
its size drawn over a log scale (so every size class is hit: small messages, 64 KiB and more
through shared memory), its contents slices of random data.

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
directions together) and each server's resident memory (RSS, and its anonymous part, the
heap, and its shared-memory regions; with the regions it holds and its threads, one a
stream), sampled every half second: its value after the warm-up (the first quarter of the
run, at most 10 s) and at the end, their difference (growth), its peak, and a dozen samples
over the run.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from typing import Any

from benchmarks._soak_calls import CALL_TIMEOUT_S
from benchmarks.courier_rpc import ROOT, child_process
from launchpad import courier

START_TIMEOUT_S = 120.0  # for every client to be connected and ready
SAMPLE_EVERY_S = 0.5
SERIES_POINTS = 12  # of the memory samples, in the report
WARMUP_SHARE, WARMUP_MAX_S = 0.25, 10.0
MIB = 1 << 20


def log(message: str) -> None:
    print(f"[soak_courier] {message}", file=sys.stderr, flush=True)


def _memory(pid: int) -> tuple[float, float, float, int, int]:
    """Process `pid`'s resident memory in MiB: all of it (RSS), its anonymous part (its heap:
    what a leak would grow) and its shared-memory part (courier's regions, its own and those
    of its peers it reads); the regions it holds open and its threads (one per stream)."""
    found = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssShmem", "Threads"):
                found[key] = int(value.split()[0])
    regions = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # an fd closed meanwhile
            regions += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:")
    return (found["VmRSS"] / 1024, found["RssAnon"] / 1024, found["RssShmem"] / 1024,
            regions, found["Threads"])


def _sample(pids: list[int], samples: list, done: threading.Event, began: float) -> None:
    while not done.wait(SAMPLE_EVERY_S):
        samples.append((time.perf_counter() - began, [_memory(pid) for pid in pids]))


def memory_report(samples: list, seconds: float) -> list[dict[str, Any]]:
    """Each server's RSS (and its anonymous part) after the warm-up and at the end, the
    growth between, and the peak."""
    warmup = min(WARMUP_MAX_S, WARMUP_SHARE * seconds)
    after = [memory for at, memory in samples if at >= warmup] or [samples[-1][1]]
    report = []
    for server in range(len(samples[0][1])):
        rss, anon, shared, regions, threads = ([memory[server][part] for memory in after]
                                               for part in range(5))
        every = max(1, len(samples) // SERIES_POINTS)
        report.append({"server": server, "warmup_s": warmup,
                       "rss_after_warmup_mib": round(rss[0], 1),
                       "rss_end_mib": round(rss[-1], 1),
                       "growth_mib": round(rss[-1] - rss[0], 1),
                       "anon_growth_mib": round(anon[-1] - anon[0], 1),
                       "shmem_growth_mib": round(shared[-1] - shared[0], 1),
                       "peak_mib": round(max(memory[server][0] for _, memory in samples), 1),
                       "regions_after_warmup_end": [regions[0], regions[-1]],
                       "threads_after_warmup_end": [threads[0], threads[-1]],
                       "series_s_rss_anon_shmem_regions_threads": [
                           [round(at, 1), *(round(part, 1) for part in memory[server])]
                           for at, memory in samples[::every]]})
    return report


def _executions(addresses: list[str]) -> list[dict[str, tuple[bytes, int]]]:
    found = []
    for address in addresses:
        client = courier.Client(address, call_timeout=CALL_TIMEOUT_S)
        try:
            found.append(client.executions())
        finally:
            courier.close(client)
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


class _Client:
    """A client process (_soak_calls.py's main), ended when the soak is."""

    def __init__(self, name: str, seed: int, seconds: float, addresses: list[str]):
        self.name = name
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks._soak_calls", name, str(seed), str(seconds),
             *addresses], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=str(ROOT),
            env={**os.environ, "PYTHONPATH": str(ROOT)})

    def line(self, timeout: float) -> str:
        """The next line it prints (within `timeout` seconds)."""
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else b""
        if not line:
            raise RuntimeError(f"soak client {self.name} printed nothing within {timeout:.0f}"
                               f" s (exit status {self.process.poll()})")
        return line.decode()

    def start(self) -> None:
        self.process.stdin.write(b"go\n")
        self.process.stdin.flush()

    def end(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()


def run(clients: int = 8, servers: int = 2, seconds: float = 60.0,
        seed: int = 0) -> dict[str, Any]:
    """The soak (see the module's doc); returns the report."""
    argv = [sys.executable, "-m", "benchmarks._courier_server",
            "--service", "benchmarks._soak_calls:SoakService"]
    with contextlib.ExitStack() as stack:
        started = [stack.enter_context(child_process(argv)) for _ in range(servers)]
        pids = [pid for pid, _ in started]
        addresses = [f"127.0.0.1:{port}" for _, port in started]
        processes = []
        for index in range(clients):
            processes.append(_Client(f"c{index}", seed * 1000 + index, seconds, addresses))
            stack.callback(processes[-1].end)
        log(f"{clients} clients and {servers} servers started; waiting for them")
        for process in processes:
            if process.line(START_TIMEOUT_S).strip() != "ready":
                raise RuntimeError(f"soak client {process.name} did not start")
        for process in processes:
            process.start()
        began = time.perf_counter()
        samples = [(0.0, [_memory(pid) for pid in pids])]
        done = threading.Event()
        sampler = threading.Thread(target=_sample, args=(pids, samples, done, began))
        sampler.start()
        try:
            reports = [json.loads(process.line(seconds + 2 * CALL_TIMEOUT_S))
                       for process in processes]
        finally:
            done.set()
            sampler.join()
        wall = time.perf_counter() - began
        executions = _executions(addresses)
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
