"""Benchmark: a call to a whole group, against the loops users write by hand, under local_mp.

    python -m benchmarks.group_calls [--sizes 1,8,64,256] [--rounds 30]

A program of N CourierNode members (a trivial `ping`) and one caller node holding
`program.group_handle("member")`, each a process of this host. The caller measures, in its
own process, interleaved round by round (medians of `--rounds`):

* `group_call_ms`: `group.call.ping()`, every member's result;
* `futures_loop_ms`: `[f.result() for f in [m.futures.ping() for m in members]]`;
* `blocking_loop_ms`: `[m.ping() for m in members]`, one round trip after another;
* for each of these three, `*_caller_cpu_us` and `*_others_cpu_us`: CPU per member call
  spent by the caller's process and by everything else on the machine (the members, the
  kernel), from its own CPU time and /proc/stat;
* `broadcast_1mib_ms` (up to 64 members): `group.broadcast.take(array)` of a 1 MiB float32
  array, until every member has it; `broadcast_pickles`: how many times the array was
  pickled for it; `broadcast_copied_mib`: how many MiB the caller copied into shared memory
  for it (lanes.bytes_copied), and `members_copied_mib`: how many the members copied
  out, all together;
* `futures_loop_1mib_ms` and `futures_loop_copied_mib`: the same array sent by a loop of
  each member's own `futures.take`, for comparison.

Targets (issue 29): at 64 members a group call costs at most 1.2x the futures loop and is at
least 10x faster than the blocking loop; the broadcast copies its array into shared memory
once, not once per member. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

import launchpad as lp
from launchpad.courier._shared_memory import lanes
from launchpad.courier._wire import serialization

_ARRAY = np.zeros(262144, np.float32)  # 1 MiB
_BROADCAST_MEMBERS = 64  # the broadcast is measured up to this many members (issue 29's)


class Member:
    def __init__(self):
        self._taken = 0

    def ping(self):
        return None

    def take(self, array):
        self._taken += 1
        return None

    def taken(self):
        return self._taken

    def copied_out(self):
        return lanes.bytes_copied()["read"]


class Caller:
    def __init__(self, members):
        self._members = members

    def measure(self, rounds: int) -> dict:
        group = self._members
        clients = [group[i] for i in range(len(group))]
        group.call.ping()  # every connection made first
        kinds = {"group_call_ms": lambda: group.call.ping(),
                 "futures_loop_ms": lambda: [f.result() for f in
                                             [c.futures.ping() for c in clients]],
                 "blocking_loop_ms": lambda: [c.ping() for c in clients]}
        times: dict[str, list[float]] = {kind: [] for kind in kinds}
        for _ in range(rounds):
            for kind, run in kinds.items():
                started = time.perf_counter()
                run()
                times[kind].append((time.perf_counter() - started) * 1e3)
        row = {kind: round(statistics.median(values), 3) for kind, values in times.items()}
        for kind, run in kinds.items():  # CPU: each kind's rounds in one block (/proc/stat
            own, machine = time.process_time(), _machine_cpu_secs()  # counts 10 ms ticks)
            for _ in range(rounds):
                run()
            own, machine = time.process_time() - own, _machine_cpu_secs() - machine
            name, calls = kind.removesuffix("_ms"), rounds * len(group)
            row[f"{name}_caller_cpu_us"] = round(own / calls * 1e6, 1)
            row[f"{name}_others_cpu_us"] = round(max(0.0, machine - own) / calls * 1e6, 1)
        if len(group) <= _BROADCAST_MEMBERS:
            row.update(self._broadcast())
        return row

    def _broadcast(self) -> dict:
        group = self._members
        pickled = []
        original = serialization.dumps_call_arguments

        def counted(method, args, kwargs):
            pickled.append(method)
            return original(method, args, kwargs)

        serialization.dumps_call_arguments = counted
        try:
            copied_in, copied_out = _copied_in(), sum(group.call.copied_out())
            taken = sum(group.call.taken()) + len(group)
            started = time.perf_counter()
            group.broadcast.take(_ARRAY)
            while sum(group.call.taken()) < taken:
                time.sleep(0.001)
            took = (time.perf_counter() - started) * 1e3
            row = {"broadcast_1mib_ms": round(took, 2),
                   "broadcast_pickles": pickled.count("take"),
                   "broadcast_copied_mib": _mib(_copied_in() - copied_in),
                   "members_copied_mib": _mib(sum(group.call.copied_out()) - copied_out)}
        finally:
            serialization.dumps_call_arguments = original
        copied_in = _copied_in()
        started = time.perf_counter()
        [f.result() for f in [group[i].futures.take(_ARRAY) for i in range(len(group))]]
        took = (time.perf_counter() - started) * 1e3
        row.update({"futures_loop_1mib_ms": round(took, 2),
                    "futures_loop_copied_mib": _mib(_copied_in() - copied_in)})
        return row


def _machine_cpu_secs() -> float:
    """CPU seconds the whole machine has spent busy (every process, and the kernel)."""
    with open("/proc/stat") as stat:
        fields = [int(field) for field in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def _copied_in() -> int:
    return lanes.bytes_copied()["written"]


def _mib(nbytes: int) -> float:
    return round(nbytes / 2**20, 2)


def _run(size: int, rounds: int) -> dict:
    program = lp.Program(f"group-calls-{size}")
    with program.group("member"):
        for _ in range(size):
            program.add_node(lp.CourierNode(Member))
    caller = program.add_node(lp.CourierNode(Caller, program.group_handle("member")),
                              label="caller")
    started = time.perf_counter()
    controller = lp.launch(program, launch_type="local_mp", terminal="output_to_files")
    try:
        client = caller.dereference()
        client.measure(1)  # warm: every member up and connected
        ready_s = time.perf_counter() - started
        row = client.measure(rounds)
    finally:
        controller.stop()
        controller.wait(timeout=120)
    row.update({"members": size, "ready_s": round(ready_s, 2),
                "vs_futures_loop": round(row["group_call_ms"] / row["futures_loop_ms"], 3),
                "blocking_over_group": round(row["blocking_loop_ms"] / row["group_call_ms"],
                                             1)})
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,8,64,256")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    results = []
    for size in [int(s) for s in args.sizes.split(",")]:
        results.append(_run(size, args.rounds))
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    print(json.dumps({"benchmark": "group_calls", "launch_type": "local_mp",
                      "rounds": args.rounds, "results": results}))


if __name__ == "__main__":
    main()
