"""Benchmark: courier against DeepMind Launchpad 0.5.2's, a raw socket and raw grpcio.

Run: `python -m benchmarks.courier_rpc [--rounds N] [--calls N] [--seconds S]`, as root for the
between-hosts figures. With `LAUNCHPAD_BASELINE_PY=/path/to/python` (the interpreter of a
Launchpad 0.5.2 venv, see ../shared/bench/), the same program runs under Launchpad too. Prints
one JSON object on stdout; progress goes to stderr.

In each round, interleaved, so that every system sees the same drift of a shared machine:
* `rpc_program.py`, a Launchpad program (a CourierNode and a client PyNode that measures
  through its handle), under this project and under Launchpad 0.5.2, as `mp` (the nodes two
  processes of this host: our local transport) and `mt` (two threads of one process: our
  in-process transport);
* the same loops against a raw length-prefixed TCP echo in another process (the floor: no
  Python RPC between processes can be faster) and against raw grpcio unary calls;
* between hosts (two network namespaces, as the cluster tests simulate them): a courier
  server, a raw grpcio server and the raw socket echo in the other namespace, in plaintext
  and over TLS, called from this one (courier on the TCP port its server offers, and forced
  onto gRPC; over TLS, gRPC).

The report holds each system's medians over rounds and the issue's table: every figure as a
ratio to Launchpad's (or to raw grpcio's, between hosts) measured in the same run, its target,
and whether it is met. The ratio to the raw socket says how far each figure is from the
floor.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import rpc_program
from benchmarks._baselines import GrpcClient, SocketClient
from launchpad import courier
from tests.courier import children

ROOT = Path(__file__).resolve().parent.parent
PROGRAM_TIMEOUT_S = 300.0

# (figure, our system and key, Launchpad's, the target ratio (None: none, reported only),
# whether lower is better)
TABLE = [
    ("small call p50 us, another process", ("mp", "latency_us.none.p50"),
     ("mp", "latency_us.none.p50"), 0.45, True),
    ("1 KiB call p50 us, another process", ("mp", "latency_us.1kib.p50"),
     ("mp", "latency_us.1kib.p50"), 0.45, True),
    ("small call p50 us, same process", ("mt", "latency_us.none.p50"),
     ("mt", "latency_us.none.p50"), 0.1, True),
    ("1 MiB float32 array in and out p50 us (Launchpad: returned only)",
     ("mp", "latency_us.1mib_both.p50"), ("mp", "latency_us.1mib_returned.p50"), 0.35, True),
    ("calls/s, 4 threads each with its own client", ("mp", "threads_calls_per_s"),
     ("mp", "threads_calls_per_s"), 1.6, False),
    ("calls/s, one thread with 16 futures in flight", ("mp", "in_flight_calls_per_s"),
     ("mp", "in_flight_calls_per_s"), 3.5, False),
    ("calls/s, 16 threads sharing one client", ("mp", "shared_client_calls_per_s"),
     ("mp", "shared_client_calls_per_s"), None, False),
    ("calls/s, one thread with 64 futures in flight", ("mp", "in_flight_64_calls_per_s"),
     ("mp", "in_flight_64_calls_per_s"), None, False),
]


def log(message: str) -> None:
    print(f"[courier_rpc] {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- the program


def run_program(python: str, launchpad_0_5: bool, mode: str, calls: int,
                seconds: float) -> dict[str, Any]:
    """Runs rpc_program.py under `python` and returns its figures. Launchpad 0.5.2 runs it by
    path from a folder of its own, without PYTHONPATH, so that this project's `launchpad` is
    not importable there."""
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "figures.json")
        flags = ["--mode", mode, "--out", out, "--calls", str(calls), "--seconds", str(seconds)]
        env = dict(os.environ)
        if launchpad_0_5:
            argv, cwd = [python, str(ROOT / "benchmarks" / "rpc_program.py"), *flags], folder
            env.pop("PYTHONPATH", None)
        else:
            argv, cwd = [python, "-m", "benchmarks.rpc_program", *flags], str(ROOT)
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=PROGRAM_TIMEOUT_S)
        if done.returncode != 0 or not os.path.exists(out):
            raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}):\n"
                               f"{done.stderr[-3000:]}")
        with open(out) as f:
            return json.load(f)


# ----------------------------------------------------------------------------- baselines


@contextlib.contextmanager
def child_process(argv: list[str]) -> Iterator[tuple[int, int]]:
    """Runs a server child from the project's root (it prints its port, and ends when its
    stdin closes); yields its pid and port."""
    with children.child_server(argv, cwd=str(ROOT),
                               env={**os.environ, "PYTHONPATH": str(ROOT)}) as started:
        yield started


@contextlib.contextmanager
def child_server(argv: list[str]) -> Iterator[int]:
    """As child_process; yields the port only."""
    with child_process(argv) as (_, port):
        yield port


def measure_baseline(module: str, make_client, calls: int, seconds: float) -> dict[str, Any]:
    with child_server([sys.executable, "-m", f"benchmarks.{module}"]) as port:
        client = make_client(f"127.0.0.1:{port}")
        try:
            return rpc_program.measure(client, calls, seconds)
        finally:
            courier.close(client)


# ----------------------------------------------------------------------------- between hosts


def _write_tls(folder: str) -> courier.TLS:
    tls = courier.TLS.generate()
    for name, pem in (("ca", tls.ca), ("cert", tls.cert), ("key", tls.key)):
        with open(os.path.join(folder, f"{name}.pem"), "wb") as f:
            f.write(pem)
    return tls


# What is measured between hosts: (name, server module, the client's courier transport, or
# None for a raw client), each in plaintext; over TLS courier (on gRPC) and raw grpcio.
_BETWEEN_HOSTS = [("courier", "_courier_server", "auto"),
                  ("courier_grpc", "_courier_server", "grpc"),
                  ("raw_grpc", "_rawgrpc_server", None),
                  ("raw_socket", "_socket_server", None)]


def between_hosts(calls: int) -> dict[str, Any]:
    """Courier (on its TCP port, and forced onto gRPC), raw grpcio and a raw socket echo,
    servers in another network namespace, with and without TLS: small calls and a 1 MiB
    array both ways."""
    from tests.cluster.netns import HostNetwork  # root only: imported when measured

    array = np.random.default_rng(0).random(rpc_program.ARRAY_ELEMENTS).astype(np.float32)
    figures: dict[str, Any] = {}
    with HostNetwork(1) as network, tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o700)
        host = network.hosts[0]
        tls = _write_tls(folder)
        for security, flags in (("plaintext", []), ("tls", ["--tls", folder])):
            for name, module, mode in _BETWEEN_HOSTS:
                if security == "tls" and name in ("courier_grpc", "raw_socket"):
                    continue  # courier over TLS is on gRPC; the raw echo has no TLS
                argv = network.exec_argv(host, [sys.executable, "-m", f"benchmarks.{module}",
                                                "--host", host.address, *flags])
                with child_server(argv) as port:
                    address = f"{host.address}:{port}"
                    use_tls = tls if security == "tls" else None
                    client = (courier.Client(address, tls=use_tls, transport=mode)
                              if mode is not None else SocketClient(address)
                              if name == "raw_socket" else GrpcClient(address, use_tls))
                    try:
                        small = rpc_program._latency(client.ping, None, calls, warmup=100)
                        large = rpc_program._latency(client.ping, array, calls // 10,
                                                     warmup=10)
                        if mode is not None:  # over TLS only gRPC is offered
                            wanted = "tcp" if mode == "auto" and use_tls is None else "grpc"
                            used = courier.transport_of(client)
                            assert used == wanted, used
                    finally:
                        courier.close(client)
                figures[f"{name}_{security}"] = {"none_p50_us": small["p50"],
                                                 "1mib_both_p50_us": large["p50"]}
    return figures


# ----------------------------------------------------------------------------- the report


def _get(figures: dict[str, Any], key: str) -> float | None:
    for part in key.split("."):
        if not isinstance(figures, dict) or part not in figures:
            return None
        figures = figures[part]
    return figures


def _medians(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of each figure over rounds (nested dicts of numbers)."""
    first = rounds[0]
    if isinstance(first, dict):
        return {key: _medians([r[key] for r in rounds]) for key in first}
    return round(statistics.median(rounds), 1)


def table(systems: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for figure, (our_mode, our_key), (lp_mode, lp_key), target, lower in TABLE:
        ours = _get(systems.get(f"ours_{our_mode}", {}), our_key)
        theirs = _get(systems.get(f"launchpad_{lp_mode}", {}), lp_key)
        floor = _get(systems.get("raw_socket", {}), our_key)
        row: dict[str, Any] = {"figure": figure, "ours": ours, "launchpad": theirs,
                               "target_ratio": target}
        if theirs:
            row["ratio"] = round(ours / theirs, 3)
            if target is not None:
                row["met"] = row["ratio"] <= target if lower else row["ratio"] >= target
        if floor and our_mode == "mp":
            row["ratio_to_raw_socket"] = round(ours / floor, 2)
        rows.append(row)
    hosts = systems.get("between_hosts")
    for security in ("plaintext", "tls") if hosts else ():
        for key in ("none_p50_us", "1mib_both_p50_us"):
            ours = hosts[f"courier_{security}"][key]
            raw = hosts[f"raw_grpc_{security}"][key]
            row = {"figure": f"between hosts, {security}, {key}", "ours": ours,
                   "raw_grpc": raw, "ratio": round(ours / raw, 3), "target_ratio": 1.0,
                   "met": ours <= raw}
            if security == "plaintext":
                row["ours_on_grpc"] = hosts["courier_grpc_plaintext"][key]
                row["ratio_to_raw_socket"] = round(ours / hosts["raw_socket_plaintext"][key], 2)
            rows.append(row)
    return rows


def run(rounds: int, calls: int, seconds: float) -> dict[str, Any]:
    baseline_python = os.environ.get("LAUNCHPAD_BASELINE_PY")
    collected: dict[str, list[dict[str, Any]]] = {}

    def add(name: str, figures: dict[str, Any]) -> None:
        collected.setdefault(name, []).append(figures)

    for number in range(1, rounds + 1):
        log(f"round {number} of {rounds}")
        for mode in ("mp", "mt"):
            add(f"ours_{mode}", run_program(sys.executable, False, mode, calls, seconds))
            if baseline_python:
                add(f"launchpad_{mode}", run_program(baseline_python, True, mode, calls,
                                                     seconds))
        add("raw_socket", measure_baseline("_socket_server", SocketClient, calls, seconds))
        add("raw_grpc", measure_baseline("_rawgrpc_server", GrpcClient, calls, seconds))
        if os.geteuid() == 0:
            add("between_hosts", between_hosts(calls))
    systems = {name: _medians(figures) for name, figures in collected.items()}
    rows = table(systems)
    return {
        "benchmark": "courier_rpc",
        "python": platform.python_version(),
        "rounds": rounds,
        "launchpad_baseline": baseline_python or "not run (set LAUNCHPAD_BASELINE_PY)",
        "between_hosts": "measured" if os.geteuid() == 0 else "not run (needs root)",
        "systems": systems,
        "table": rows,
        "targets_met": all(row.get("met", False) for row in rows
                           if row["target_ratio"] is not None),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000,
                        help="sequential calls per small-payload latency (a tenth for 1 MiB)")
    parser.add_argument("--seconds", type=float, default=2.0,
                        help="seconds of each throughput figure")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.calls < 10 or args.seconds <= 0:
        parser.error("--rounds must be >= 1, --calls >= 10 and --seconds > 0")
    started = time.perf_counter()
    report = run(args.rounds, args.calls, args.seconds)
    log(f"done in {time.perf_counter() - started:.1f}s")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
