"""Benchmark: what telemetry costs courier's calls (issue 17: it must not slow the hot path
measurably).

Run: `python -m benchmarks.telemetry_overhead [--rounds N] [--calls N] [--seconds S]`.
Prints one JSON object on stdout; progress goes to stderr.

Each figure is measured with the telemetry as it is (`on`) and without it (`off`), in
interleaved rounds whose order alternates, so that both see the same drift of a shared
machine; the report has the medians over rounds and their ratio on/off (1.0: no cost; for
latency lower is better, for calls/s higher):

* `server_metrics.another_process`: a courier server in a child process
  (_courier_server.py; `--no-metrics` replaces courier/metrics.py's `CallMetrics.record` by
  a no-op), called over the local transport from here: small-call latency p50 and p99 (us),
  and calls/s with 16 futures in flight;
* `server_metrics.same_process`: a server in this process (the in-process transport), its
  recording replaced by the no-op between measurements and put back;
* `node_reporting`: a local_mt program (a CourierNode serving Echo) called through its handle
  from the launching process, with the node's reporting thread (launch/node_process/reporting.py: a
  sample to the controller every telemetry.REPORT_SECS) started or not;
* `record_ns`: one `CallMetrics.record`, timed alone (median of repeats).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import sys
import time
import timeit
from collections.abc import Callable, Iterator
from typing import Any

import launchpad as lp
from benchmarks import rpc_program
from benchmarks.courier_rpc import child_server
from launchpad import courier
from launchpad.courier import metrics
from launchpad.launch.node_process import reporting

VARIANTS = ("on", "off")


def log(message: str) -> None:
    print(f"[telemetry_overhead] {message}", file=sys.stderr, flush=True)


def measure(client: Any, calls: int, seconds: float) -> dict[str, float]:
    latency = rpc_program._latency(client.ping, rpc_program.SMALL, calls, warmup=200)
    return {"p50_us": latency["p50"], "p99_us": latency["p99"],
            "in_flight_calls_per_s": round(rpc_program._in_flight(client, 16, seconds))}


@contextlib.contextmanager
def replaced(owner: Any, name: str, value: Any, replace: bool) -> Iterator[None]:
    """`owner.name` is `value` inside the block if `replace`, as it was after it."""
    if not replace:
        yield
        return
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


def _no_record(self, method: str, secs: float, failed: bool) -> None:
    """CallMetrics.record without the recording."""


def _no_reporting(*args: Any, **kwargs: Any) -> None:
    """reporting.start without the thread."""


def node_reporting(variant: str, calls: int, seconds: float) -> dict[str, float]:
    program = lp.Program("telemetry_overhead")
    handle = program.add_node(lp.CourierNode(rpc_program.Echo), "server")
    with replaced(reporting, "start", _no_reporting, variant == "off"):
        controller = lp.launch(program, launch_type="local_mt")
        try:
            if not controller.wait_for_started("server/0", 60):
                raise RuntimeError("the server node did not start within 60 s")
            return measure(handle.dereference(), calls, seconds)
        finally:
            controller.stop()
            controller.wait()


def record_ns() -> float:
    counters = metrics.CallMetrics()
    number = 200_000
    runs = timeit.repeat(lambda: counters.record("ping", 3e-5, False), number=number, repeat=5)
    return round(statistics.median(runs) / number * 1e9, 1)


def _summary(rounds: list[dict[str, dict[str, float]]]) -> dict[str, Any]:
    """Medians of each variant's figures over rounds, their ratios on/off, and each round's
    figures (how far apart rounds are says how much of a ratio is the machine's noise)."""
    medians: dict[str, Any] = {
        variant: {key: round(statistics.median(r[variant][key] for r in rounds), 1)
                  for key in rounds[0][variant]} for variant in VARIANTS}
    medians["ratio_on_to_off"] = {key: round(medians["on"][key] / medians["off"][key], 3)
                                  for key in medians["on"]}
    medians["each_round"] = rounds
    return medians


def run(rounds: int, calls: int, seconds: float) -> dict[str, Any]:
    collected: dict[str, list[dict[str, dict[str, float]]]] = {
        "another_process": [], "same_process": [], "node_reporting": []}
    with contextlib.ExitStack() as stack:
        children = {}
        for variant in VARIANTS:
            flags = [] if variant == "on" else ["--no-metrics"]
            port = stack.enter_context(child_server(
                [sys.executable, "-m", "benchmarks._courier_server", *flags]))
            children[variant] = courier.Client(f"127.0.0.1:{port}")
            stack.callback(children[variant].close)
        local = courier.Server(rpc_program.Echo())
        stack.callback(local.stop)
        in_process = courier.Client(local.start())
        measurements: dict[str, Callable[[str], dict[str, float]]] = {
            "another_process": lambda v: measure(children[v], calls, seconds),
            "same_process": lambda v: _in_process(in_process, v, calls, seconds),
            "node_reporting": lambda v: node_reporting(v, calls, seconds),
        }
        for number in range(rounds):
            log(f"round {number + 1} of {rounds}")
            order = VARIANTS if number % 2 == 0 else VARIANTS[::-1]
            for name, measurement in measurements.items():
                collected[name].append({variant: measurement(variant) for variant in order})
    return {
        "benchmark": "telemetry_overhead",
        "python": platform.python_version(),
        "rounds": rounds, "calls": calls, "seconds": seconds,
        "record_ns": record_ns(),
        "server_metrics": {"another_process": _summary(collected["another_process"]),
                           "same_process": _summary(collected["same_process"])},
        "node_reporting": _summary(collected["node_reporting"]),
    }


def _in_process(client: courier.Client, variant: str, calls: int,
                seconds: float) -> dict[str, float]:
    with replaced(metrics.CallMetrics, "record", _no_record, variant == "off"):
        return measure(client, calls, seconds)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=3000,
                        help="sequential small calls per latency figure")
    parser.add_argument("--seconds", type=float, default=1.0,
                        help="seconds of each calls/s figure")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.calls < 10 or args.seconds <= 0:
        parser.error("--rounds must be >= 1, --calls >= 10 and --seconds > 0")
    started = time.perf_counter()
    report = run(args.rounds, args.calls, args.seconds)
    log(f"done in {time.perf_counter() - started:.1f}s")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
