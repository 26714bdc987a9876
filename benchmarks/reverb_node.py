"""Benchmark: Reverb through a ReverbNode against a plain Reverb server, in the same run.

Run: `python -m benchmarks.reverb_node [--rounds N] [--seconds S]`. Prints one JSON object on
stdout; progress goes to stderr. Needs the Reverb stack (the main venv has it).

Two servers with the same tables, each in a process of its own: a ReverbNode of a program
launched with local_mp, and a plain `reverb.Server` (the baseline, `benchmarks/_reverb_server`).
The same client code, in this process, drives both with `reverb.Client`s:

* insert: items/s written with `trajectory_writer`, one step per item (the way actors write);
* sample: items/s read with `client.sample` (each sample one item);

for small items (a float32 scalar and an int32) and for 84x84x4 uint8 observations.

The speed of this kind of small virtual machine drifts by tens of percent from one second to
the next, so every figure is measured in interleaved rounds (the sides back to back, each
round starting from the next side, `--rounds` times), and with 2 or more cores this process
runs on core 0 and the servers on core 1, so no server competes with the client for a core.
A second plain server (the control) is measured like the others: how far it is from the first
shows what noise alone does to a ratio in this run. Reported per figure: items/s of each side
over all rounds, and each side's ratio to the plain server, pooled and per round (min,
median, max of the ratio of a round's back-to-back measurements). Target: ReverbNode >= 0.95x
plain, judged on the median round ratio (a burst of the machine during one measurement moves
the pooled ratio, not the median).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

PAYLOADS = {
    "small": lambda: {"reward": np.float32(1.0), "step": np.int32(3)},
    "atari_84x84x4_uint8": lambda: {"observation": np.zeros([84, 84, 4], np.uint8)},
}


def make_tables():
    """One uniform table per payload: sampling never waits once an item is in."""
    import reverb
    return [reverb.Table(name, sampler=reverb.selectors.Uniform(),
                         remover=reverb.selectors.Fifo(), max_size=100_000,
                         rate_limiter=reverb.rate_limiters.MinSize(1))
            for name in PAYLOADS]


def _insert_rate(client, table: str, seconds: float) -> tuple[int, float]:
    step = PAYLOADS[table]()
    count, started = 0, time.perf_counter()
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
        while time.perf_counter() - started < seconds:
            for _ in range(100):
                writer.append(step)
                writer.create_item(table, 1.0, {k: writer.history[k][-1] for k in step})
            writer.flush()
            count += 100
    return count, time.perf_counter() - started


def _sample_rate(client, table: str, seconds: float) -> tuple[int, float]:
    count, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        for _ in client.sample(table, num_samples=200, emit_timesteps=False):
            count += 1
    return count, time.perf_counter() - started


def _rate(rounds: list[tuple[int, float]]) -> float:
    return sum(count for count, _ in rounds) / sum(elapsed for _, elapsed in rounds)


def _versus_plain(side: list[tuple[int, float]], plain: list[tuple[int, float]]) -> dict:
    """`side`'s items/s over plain's, pooled over the rounds, and the spread of the ratio of
    each round's back-to-back measurements (min, median, max)."""
    per_round = sorted((n / ne) / (p / pe) for (n, ne), (p, pe) in zip(side, plain, strict=True))
    return {"ratio": round(_rate(side) / _rate(plain), 3),
            "round_ratio_min_median_max": [round(per_round[0], 3),
                                           round(statistics.median(per_round), 3),
                                           round(per_round[-1], 3)]}


def _pin(pid: int, cpus: set[int]) -> None:
    """Pins every thread of process `pid` (threads it starts later inherit it)."""
    for thread in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(thread), cpus)


def _plain_server():
    server = subprocess.Popen([sys.executable, "-m", "benchmarks._reverb_server"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return server, int(server.stdout.readline())


def _measure(clients: dict, rounds: int, seconds: float) -> dict:
    """(table, figure, side) -> [(items, seconds)] per round. Each round measures the sides
    back to back, starting from a different side each round."""
    per_round: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
    sides = list(clients.items())
    for round_index in range(rounds):
        print(f"round {round_index + 1}/{rounds}", file=sys.stderr, flush=True)
        start = round_index % len(sides)
        for table in PAYLOADS:
            for figure, measure in (("insert", _insert_rate), ("sample", _sample_rate)):
                for side, client in sides[start:] + sides[:start]:
                    per_round.setdefault((table, figure, side), []).append(
                        measure(client, table, seconds))
    return per_round


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--seconds", type=float, default=2.0, help="per figure and round")
    args = parser.parse_args(argv)
    import reverb

    import launchpad as lp
    program = lp.Program("reverb_benchmark")
    handle = program.add_node(lp.ReverbNode(make_tables), label="replay")
    controller = lp.launch(program, launch_type="local_mp", terminal="output_to_files")
    plain_servers = [_plain_server() for _ in ("baseline", "control")]
    pinned = os.cpu_count() >= 2
    try:
        if pinned:
            for server in [p.pid for p, _ in plain_servers] + [controller.pids()["replay/0"]]:
                _pin(server, {1})
            _pin(os.getpid(), {0})
        clients = {"reverb_node": handle.dereference().client,
                   **{side: reverb.Client(f"127.0.0.1:{port}") for side, (_, port) in
                      zip(("plain_reverb", "plain_reverb_control"), plain_servers,
                          strict=True)}}
        per_round = _measure(clients, args.rounds, args.seconds)
    finally:
        for server, _ in plain_servers:
            server.stdin.close()
            server.wait()
        controller.stop()
        controller.wait()
    results: dict = {}
    for table in PAYLOADS:
        for figure in ("insert", "sample"):
            rounds = {side: per_round[(table, figure, side)] for side in clients}
            results.setdefault(table, {})[figure] = {
                **{f"{side}_items_per_s": round(_rate(r)) for side, r in rounds.items()},
                "reverb_node_vs_plain": _versus_plain(rounds["reverb_node"],
                                                      rounds["plain_reverb"]),
                "control_vs_plain": _versus_plain(rounds["plain_reverb_control"],
                                                  rounds["plain_reverb"])}
    report = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                          "client_and_servers_pinned_apart": pinned},
              "rounds": args.rounds, "seconds_per_figure_and_round": args.seconds,
              "results": results,
              "target_met": all(
                  f["reverb_node_vs_plain"]["round_ratio_min_median_max"][1] >= 0.95
                  for t in results.values() for f in t.values())}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
