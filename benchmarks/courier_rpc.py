"""Benchmark: courier calls against raw gRPC unary calls, server in another process.

Run: `python -m benchmarks.courier_rpc [--quick] [--duration SECONDS]`. Prints one JSON object on
stdout; progress goes to stderr.

What is measured, each for courier and for the raw-gRPC baseline:

* latency: sequential round trips from one thread (after a warm-up), p50 and p99 in
  microseconds, for three payloads: None, 1 KiB of bytes, and a 1 MiB float32 numpy array;
  for the array also courier with its same-host shortcut turned off (`courier_inline`), which
  is what a call to another host pays;
* throughput with 4 threads sharing one client, each making sequential small calls for a fixed
  duration (calls/s);
* throughput with one thread keeping 16 small calls in flight for a fixed duration (calls/s).

The baseline is the cheapest call grpcio can make from Python: a generic unary-unary handler with
raw bytes in and out (no (de)serializers, no pickling), echoing the request, served by a
16-thread pool, with unlimited message size. It sends b"" for None and the same 1 KiB of
bytes; for the array it does the least a raw-gRPC caller must do to send an array and get one
back: `tobytes()` on the way out, `np.frombuffer` (no copy) on the reply. So it measures what
gRPC alone costs per call. Courier adds pickling, framing, a method name
and matching replies to calls, but carries its calls on long-lived bidirectional streams, runs
each call on its stream's own server thread and coalesces calls queued together into one
message; on a 2-core machine Python's per-message work dominates (see shared/notes/STACK.md), so
courier can be faster than the baseline. Between processes of one host, as here, courier
passes large parts through shared memory (launchpad/courier/shared_memory.py); the
`courier_inline` figure shows the same calls through gRPC alone. The targets are: courier's
p50 latency no higher than the baseline's, and its throughput no lower.

The speed of a small virtual machine drifts by tens of percent over seconds, so every figure
is measured in interleaved rounds (courier, then raw gRPC, `--rounds` times): latency
percentiles pool the samples of all rounds, throughput sums calls over all rounds. Both sides
see the same drift, and the ratios stay meaningful.

All servers run in their own processes (a server in the client's process would share its GIL
and cores unlike any real deployment). Each child prints its bound port on stdout and exits when
its stdin closes, so neither outlives this script.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import faulthandler
import json
import os
import platform
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import numpy as np

from benchmarks import _rawgrpc_server
from launchpad import courier
from launchpad.courier import shared_memory

Call = Callable[[Any], Any]
Submit = Callable[[Any], Any]  # returns a future with .result(timeout)

PORT_TIMEOUT_S = 30.0
RESULT_TIMEOUT_S = 60.0
PAYLOAD_NAMES = ("none", "1kib", "1mib_f32")
IMPLEMENTATIONS = ("courier", "raw_grpc")
# Measured beside the others for the large payload only: courier without shared memory.
INLINE = "courier_inline"


@dataclasses.dataclass(frozen=True)
class Settings:
    """How many calls and how long each part of the benchmark runs."""

    warmup_small: int
    calls_small: int
    warmup_large: int
    calls_large: int
    duration_s: float
    rounds: int = 5
    threads: int = 4
    in_flight: int = 16


@dataclasses.dataclass(frozen=True)
class Target:
    """One implementation under test: how to call it and what to send for each payload."""

    call: Call
    submit: Submit
    payloads: dict[str, Any]


def log(message: str) -> None:
    print(f"[courier_rpc] {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- child processes


def _read_port(proc: subprocess.Popen, module: str, timeout: float) -> int:
    """Reads the port line the child prints, waiting at most `timeout` seconds."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        raise TimeoutError(f"{module} printed no port within {timeout}s")
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"{module} exited (code {proc.wait()}) before printing its port")
    return int(line)


def _stop_child(proc: subprocess.Popen) -> None:
    """Closes the child's stdin (its signal to stop); terminates, then kills, if it lingers."""
    with contextlib.suppress(OSError):
        proc.stdin.close()
    for escalate in (proc.terminate, proc.kill):
        try:
            proc.wait(timeout=5)
            break
        except subprocess.TimeoutExpired:
            escalate()
    proc.wait()
    proc.stdout.close()


@contextlib.contextmanager
def child_server(module: str, env: dict[str, str] | None = None) -> Iterator[int]:
    """Runs `python -m benchmarks.<module>` (with `env` added to the environment) and yields
    the port it serves on."""
    proc = subprocess.Popen([sys.executable, "-m", f"benchmarks.{module}"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env={**os.environ, **(env or {})})
    try:
        port = _read_port(proc, module, PORT_TIMEOUT_S)
        log(f"{module} (pid {proc.pid}) serves on port {port}")
        yield port
    finally:
        _stop_child(proc)


# ----------------------------------------------------------------------------- clients


def make_payloads() -> tuple[dict[str, Any], dict[str, Any]]:
    """Returns the courier payloads and what the baseline sends for each of them."""
    array = np.arange(262144, dtype=np.float32)  # 1 MiB
    kib = b"x" * 1024
    courier_payloads = {"none": None, "1kib": kib, "1mib_f32": array}
    raw_payloads = {"none": b"", "1kib": kib, "1mib_f32": array}
    return courier_payloads, raw_payloads


def _raw_call(stub: grpc.UnaryUnaryMultiCallable) -> Call:
    """A raw unary call; an array goes as its bytes and comes back as a view of the reply,
    which is the least any caller of raw gRPC must do to send an array."""
    def call(payload: Any) -> Any:
        if isinstance(payload, np.ndarray):
            return np.frombuffer(stub(payload.tobytes()), payload.dtype)
        return stub(payload)
    return call


def courier_target(stack: contextlib.ExitStack, port: int) -> Target:
    client = courier.Client(f"127.0.0.1:{port}")
    stack.callback(client.close)
    payloads, _ = make_payloads()
    return Target(call=client.echo, submit=client.futures.echo, payloads=payloads)


def raw_target(stack: contextlib.ExitStack, port: int) -> Target:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=_rawgrpc_server.OPTIONS)
    stack.callback(channel.close)
    grpc.channel_ready_future(channel).result(timeout=PORT_TIMEOUT_S)
    stub = channel.unary_unary(_rawgrpc_server.METHOD_PATH)  # no serializers: bytes in and out
    _, payloads = make_payloads()
    return Target(call=_raw_call(stub), submit=stub.future, payloads=payloads)


def check_echo(name: str, target: Target) -> None:
    """Fails loudly if a target does not echo each payload back unchanged."""
    for payload_name, payload in target.payloads.items():
        result = target.call(payload)
        same = (np.array_equal(result, payload) if isinstance(payload, np.ndarray)
                else result == payload)
        if not same:
            raise AssertionError(f"{name} did not echo the {payload_name} payload back")


# ----------------------------------------------------------------------------- measurements


def latency_samples(call: Call, payload: Any, warmup: int, calls: int) -> np.ndarray:
    """Sequential round trips from this thread; returns each one's duration in seconds."""
    for _ in range(warmup):
        call(payload)
    samples = np.empty(calls)
    clock = time.perf_counter
    for i in range(calls):
        start = clock()
        call(payload)
        samples[i] = clock() - start
    return samples


def percentiles(samples: list[np.ndarray]) -> dict[str, float]:
    p50, p99 = np.percentile(np.concatenate(samples), [50, 99]) * 1e6
    return {"p50": round(float(p50), 1), "p99": round(float(p99), 1)}


def throughput_threads(call: Call, payload: Any, threads: int,
                       duration: float) -> tuple[int, float]:
    """`threads` threads share one client, each calling sequentially; returns (calls, s)."""
    counts = [0] * threads
    failures: list[BaseException] = []
    start = [0.0]
    barrier = threading.Barrier(threads, action=lambda: start.__setitem__(0, time.perf_counter()))

    def worker(index: int) -> None:
        barrier.wait()
        deadline = start[0] + duration
        done = 0
        try:
            while time.perf_counter() < deadline:
                call(payload)
                done += 1
        except BaseException as e:  # noqa: BLE001 - re-raised in the calling thread
            failures.append(e)
        counts[index] = done

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    if failures:
        raise failures[0]
    return sum(counts), time.perf_counter() - start[0]


def throughput_in_flight(submit: Submit, payload: Any, depth: int,
                         duration: float) -> tuple[int, float]:
    """One thread keeps `depth` calls in flight, replacing the oldest as it completes;
    returns (calls, seconds)."""
    start = time.perf_counter()
    deadline = start + duration
    pending = collections.deque(submit(payload) for _ in range(depth))
    done = 0
    while pending:
        pending.popleft().result(timeout=RESULT_TIMEOUT_S)
        done += 1
        if time.perf_counter() < deadline:
            pending.append(submit(payload))
    return done, time.perf_counter() - start


# ----------------------------------------------------------------------------- the report


def ratio(courier_value: float, raw_value: float) -> float:
    return round(courier_value / raw_value, 3)


def latency_section(targets: dict[str, Target], settings: Settings) -> dict[str, Any]:
    section: dict[str, Any] = {}
    for payload_name in PAYLOAD_NAMES:
        large = payload_name == "1mib_f32"
        warmup = settings.warmup_large if large else settings.warmup_small
        calls = (settings.calls_large if large else settings.calls_small) // settings.rounds
        names = IMPLEMENTATIONS + (INLINE,) if large else IMPLEMENTATIONS
        samples: dict[str, list[np.ndarray]] = {name: [] for name in names}
        log(f"latency {payload_name}: {settings.rounds} rounds of {calls} calls each")
        for _ in range(settings.rounds):
            for name in names:
                target = targets[name]
                samples[name].append(latency_samples(
                    target.call, target.payloads[payload_name], warmup, calls))
        row: dict[str, Any] = {name: percentiles(samples[name]) for name in names}
        row["ratio_p50"] = ratio(row["courier"]["p50"], row["raw_grpc"]["p50"])
        row["ratio_p99"] = ratio(row["courier"]["p99"], row["raw_grpc"]["p99"])
        if large:  # not a target: what a call to another host pays
            row[f"{INLINE}_ratio_p50"] = ratio(row[INLINE]["p50"], row["raw_grpc"]["p50"])
        section[payload_name] = row
    return section


def throughput_section(targets: dict[str, Target], settings: Settings) -> dict[str, Any]:
    runs = {
        f"{settings.threads}_threads": lambda target, payload, seconds: throughput_threads(
            target.call, payload, settings.threads, seconds),
        f"{settings.in_flight}_in_flight": lambda target, payload, seconds: throughput_in_flight(
            target.submit, payload, settings.in_flight, seconds),
    }
    seconds = settings.duration_s / settings.rounds
    section: dict[str, Any] = {}
    for key, measure in runs.items():
        totals = {name: [0, 0.0] for name in IMPLEMENTATIONS}
        log(f"throughput {key}: {settings.rounds} rounds of {seconds:.2f}s each")
        for _ in range(settings.rounds):
            for name in IMPLEMENTATIONS:
                calls, elapsed = measure(targets[name], targets[name].payloads["none"], seconds)
                totals[name][0] += calls
                totals[name][1] += elapsed
        row: dict[str, Any] = {name: round(calls / elapsed)
                               for name, (calls, elapsed) in totals.items()}
        row["ratio"] = ratio(row["courier"], row["raw_grpc"])
        section[key] = row
    return section


def targets_met(report: dict[str, Any]) -> bool:
    latency_ok = all(row["ratio_p50"] <= 1.0 for row in report["latency_us"].values())
    throughput = report["throughput_calls_per_s"].values()
    return latency_ok and all(row["ratio"] >= 1.0 for row in throughput)


def run(settings: Settings) -> dict[str, Any]:
    """Starts both servers, measures, stops everything; returns the report."""
    with contextlib.ExitStack() as stack:
        # The children start before this process creates any gRPC object.
        courier_port = stack.enter_context(child_server("_courier_server"))
        inline_port = stack.enter_context(child_server(
            "_courier_server", {shared_memory.ENV_SWITCH: "0"}))
        raw_port = stack.enter_context(child_server("_rawgrpc_server"))
        targets = {"courier": courier_target(stack, courier_port),
                   "raw_grpc": raw_target(stack, raw_port),
                   INLINE: courier_target(stack, inline_port)}
        for name, target in targets.items():
            check_echo(name, target)
        report: dict[str, Any] = {
            "benchmark": "courier_rpc",
            "python": platform.python_version(),
            "grpcio": grpc.__version__,
            "latency_us": latency_section(targets, settings),
            "throughput_calls_per_s": throughput_section(targets, settings),
        }
    report["targets_met"] = targets_met(report)
    return report


def parse_settings(argv: list[str] | None = None) -> Settings:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="few calls and short runs: a smoke test, not a measurement")
    parser.add_argument("--duration", type=float, default=None,
                        help="seconds each throughput figure takes per implementation, over all "
                        "rounds (default 5, or 0.5 with --quick)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="interleaved rounds per figure (default 5, or 1 with --quick)")
    args = parser.parse_args(argv)
    if args.quick:
        settings = Settings(warmup_small=20, calls_small=200, warmup_large=5, calls_large=20,
                            duration_s=0.5, rounds=1)
    else:
        settings = Settings(warmup_small=100, calls_small=3000, warmup_large=10, calls_large=300,
                            duration_s=5.0)
    if args.rounds is not None:
        if args.rounds < 1:
            parser.error("--rounds must be >= 1")
        settings = dataclasses.replace(settings, rounds=args.rounds)
    if args.duration is not None:
        if args.duration <= 0:
            parser.error("--duration must be > 0")
        settings = dataclasses.replace(settings, duration_s=args.duration)
    return settings


def main(argv: list[str] | None = None) -> None:
    settings = parse_settings(argv)
    # A hung call must not hang the run: dump every thread's stack and exit. The children see
    # their stdin close and exit too.
    faulthandler.dump_traceback_later(300, exit=True)
    started = time.perf_counter()
    report = run(settings)
    faulthandler.cancel_dump_traceback_later()
    log(f"done in {time.perf_counter() - started:.1f}s")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
