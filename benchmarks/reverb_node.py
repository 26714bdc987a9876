"""Benchmark: Reverb through a ReverbNode against a plain Reverb server, in the same run.

Run: `python -m benchmarks.reverb_node [--rounds N] [--seconds S]`. Prints one JSON object on
stdout; progress goes to stderr. Needs the Reverb stack (the main venv has it).

Two servers with the same tables, each in a process of its own: a ReverbNode of a program
launched with local_mp, and a plain `reverb.Server` (the baseline, `benchmarks/_reverb_server`).
The same client code, in this process, drives both with `reverb.Client`s:

* insert: items/s written with `trajectory_writer`, one step per item (the way actors write);
* sample: items/s read with `client.sample` (each sample one item);

for small items (a float32 scalar and an int32) and for 84x84x4 uint8 observations. Every
figure is measured in interleaved rounds (ReverbNode then plain, plain then ReverbNode, ...,
`--rounds` times) and summed over the rounds, so both see the same drift of the machine.
Target: ReverbNode >= 0.95x plain.
"""

from __future__ import annotations

import argparse
import json
import platform
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


def _plain_server():
    server = subprocess.Popen([sys.executable, "-m", "benchmarks._reverb_server"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return server, int(server.stdout.readline())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="per figure and round")
    args = parser.parse_args(argv)
    import reverb

    import launchpad as lp
    program = lp.Program("reverb_benchmark")
    handle = program.add_node(lp.ReverbNode(make_tables), label="replay")
    controller = lp.launch(program, launch_type="local_mp", terminal="output_to_files")
    plain, port = _plain_server()
    try:
        clients = {"reverb_node": handle.dereference().client,
                   "plain_reverb": reverb.Client(f"127.0.0.1:{port}")}
        totals: dict = {}
        for round_index in range(args.rounds):
            print(f"round {round_index + 1}/{args.rounds}", file=sys.stderr, flush=True)
            for table in PAYLOADS:
                for figure, measure in (("insert", _insert_rate), ("sample", _sample_rate)):
                    # Alternate who goes first, so neither side always runs on a fresher table.
                    sides = list(clients.items())[::1 if round_index % 2 == 0 else -1]
                    for side, client in sides:
                        count, elapsed = measure(client, table, args.seconds)
                        total = totals.setdefault((table, figure, side), [0, 0.0])
                        total[0] += count
                        total[1] += elapsed
    finally:
        plain.stdin.close()
        plain.wait()
        controller.stop()
        controller.wait()
    results: dict = {}
    for (table, figure, side), (count, elapsed) in totals.items():
        results.setdefault(table, {}).setdefault(figure, {})[f"{side}_items_per_s"] = round(
            count / elapsed)
    for table in results.values():
        for figure in table.values():
            figure["ratio"] = round(figure["reverb_node_items_per_s"]
                                    / figure["plain_reverb_items_per_s"], 3)
    report = {"machine": {"python": platform.python_version(), "reverb_tables": list(PAYLOADS)},
              "rounds": args.rounds, "seconds_per_figure_and_round": args.seconds,
              "results": results,
              "target_met": all(f["ratio"] >= 0.95 for t in results.values()
                                for f in t.values())}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
