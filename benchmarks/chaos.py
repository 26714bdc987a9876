"""Chaos: random SIGKILLs of a running program's restartable nodes, which it must absorb.

Run: `python -m benchmarks.chaos [--seconds 30 | --kills N] [--producers 3] [--consumers 3]
[--interval 0.2 1.5] [--seed 0]`. Prints one JSON object on stdout; progress goes to stderr.

The program (`_chaos_program.py`: a ledger that is never killed, restartable producers and
consumers) runs under local_mp with a RestartPolicy on both groups. A chaos thread in the
launching process, at random intervals, picks a group (taking turns) and a random node of it
that `controller.status()` shows running, and SIGKILLs that node's pid (as status() gives it;
no other process is ever signalled). Each kill is measured until the node is back: from the
signal to `controller.wait_for_restarts` returning and status() showing the node running in a
new process, and to the first `ping()` that the new process answers (calls from the launching
process through the node's handle). Kills are one at a time: the next interval starts once
the last node killed answers again.

Then the ledger stops the work; each consumer finishes its item, reports how many it confirmed and
returns, and the program is stopped. It is consistent when the ledger's counts match what
every consumer says it confirmed, no value was wrong, no item was confirmed twice or skipped,
the controller restarted each killed node exactly as often as it was killed (and nothing
else), every failure it saw was one of the kills, and no node ended failed. Recovery times
include the policy's backoff (`RESTART`).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import dataclasses
import json
import random
import statistics
import sys
import threading
import time
from typing import Any

import launchpad as lp
from benchmarks import _chaos_program
from tests.processes import kill_and_wait

RESTART = lp.RestartPolicy(max_restarts=10_000, backoff_secs=0.1, max_backoff_secs=0.1)
START_TIMEOUT_S = 60.0  # for every node to run, and for a killed one to run again
RESULT_TIMEOUT_S = 60.0  # for the consumers to finish once the ledger is closed
POLL_S = 0.005


def log(message: str) -> None:
    print(f"[chaos] {message}", file=sys.stderr, flush=True)


@dataclasses.dataclass
class Kill:
    """One SIGKILL and how long its node took to come back (seconds from the signal)."""

    node: str
    pid: int
    new_pid: int = 0
    running_s: float = 0.0  # until status() showed it running in a new process
    first_call_s: float = 0.0  # until the new process answered a call


class Chaos(threading.Thread):
    """Kills nodes of `victims` (names 'label/index') one at a time, after random waits of
    `interval` seconds, `kills` times (or until `seconds` have passed, with kills=None)."""

    def __init__(self, controller: Any, clients: dict[str, Any], rng: random.Random,
                 interval: tuple[float, float], kills: int | None, seconds: float):
        super().__init__(name="chaos")
        self._controller = controller
        self._clients = clients
        self._rng = rng
        self._interval = interval
        self._count = kills
        self._seconds = seconds
        self.kills: list[Kill] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as e:  # noqa: BLE001 - handed to the launching thread
            self.error = e

    def _more(self, deadline: float) -> bool:
        if self._count is not None:
            return len(self.kills) < self._count
        return time.monotonic() < deadline

    def _run(self) -> None:
        deadline = time.monotonic() + self._seconds
        groups = sorted({name.partition("/")[0] for name in self._clients})
        while self._more(deadline):
            time.sleep(self._rng.uniform(*self._interval))  # the chaos's schedule
            group = groups[len(self.kills) % len(groups)]
            rows = {row.name: row for row in self._controller.status().nodes}
            running = sorted(name for name in self._clients if name.startswith(f"{group}/")
                             and rows[name].state == "running" and rows[name].pid)
            name = self._rng.choice(running)
            self.kills.append(self._kill(name, rows[name].pid))

    def _kill(self, name: str, pid: int) -> Kill:
        kill = Kill(name, pid)
        restarts = self._controller.restarts().get(name, 0)
        with concurrent.futures.ThreadPoolExecutor(1) as caller:
            began = time.monotonic()
            kill_and_wait(pid, START_TIMEOUT_S)
            answered = caller.submit(self._first_call, self._clients[name], pid, began)
            if not self._controller.wait_for_restarts(name, restarts + 1, START_TIMEOUT_S):
                raise RuntimeError(f"{name} was not restarted within {START_TIMEOUT_S} s")
            kill.new_pid, kill.running_s = self._running_again(name, pid, began)
            kill.first_call_s = answered.result()
        return kill

    def _running_again(self, name: str, pid: int, began: float) -> tuple[int, float]:
        while time.monotonic() < began + START_TIMEOUT_S:
            row = next(row for row in self._controller.status().nodes if row.name == name)
            if row.state == "running" and row.pid not in (0, pid):
                return row.pid, time.monotonic() - began
            time.sleep(POLL_S)  # polls status(): there is no event to wait on
        raise RuntimeError(f"{name} did not run again within {START_TIMEOUT_S} s")

    @staticmethod
    def _first_call(client: Any, pid: int, began: float) -> float:
        while time.monotonic() < began + START_TIMEOUT_S:
            try:
                if client.ping() != pid:
                    return time.monotonic() - began
            except _chaos_program.RETRIED:
                pass  # the node is gone or not back yet: the next call waits for it
        raise RuntimeError(f"no call answered within {START_TIMEOUT_S} s of the kill")


def _spread(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "max": None}
    return {"p50": round(statistics.median(values), 3), "max": round(max(values), 3)}


def consistency(result: dict[str, Any], kills: list[Kill], restarts: dict[str, int],
                status: Any) -> dict[str, Any]:
    """The end state's checks (see the module's doc); "consistent" is all of them."""
    killed = collections.Counter(kill.node for kill in kills)
    failures = [f"{row.name}: {failure.reason}" for row in status.nodes
                for failure in row.failures]
    checks = {
        "ledger_matches_consumers": result["confirmed"] == result["reported"],
        "every_consumer_confirmed_work": all(count > 0 for count in result["confirmed"]),
        "wrong_values": result["wrong"], "repeated_items": result["repeats"],
        "skipped_items": result["gaps"],
        "restarts_match_kills": {name: count for name, count in restarts.items() if count}
        == dict(killed),
        "failures_not_kills": [f for f in failures if "SIGKILL" not in f],
        "failures_seen": len(failures),
        "nodes_failed": [row.name for row in status.nodes if row.state == "failed"],
    }
    checks["consistent"] = (checks["ledger_matches_consumers"]
                            and checks["every_consumer_confirmed_work"]
                            and not checks["wrong_values"] and not checks["repeated_items"]
                            and not checks["skipped_items"] and checks["restarts_match_kills"]
                            and not checks["failures_not_kills"]
                            and checks["failures_seen"] == len(kills)
                            and not checks["nodes_failed"])
    return checks


def run(seconds: float = 30.0, kills: int | None = None, producers: int = 3,
        consumers: int = 3, work_secs: float = 0.001,
        interval: tuple[float, float] = (0.2, 1.5), seed: int = 0) -> dict[str, Any]:
    """The chaos run (see the module's doc); returns the report."""
    program, handles = _chaos_program.make_program(producers, consumers, work_secs, RESTART)
    controller = lp.launch(program, launch_type="local_mp", terminal="output_to_files")
    clients: dict[str, Any] = {}
    try:
        for name in handles:
            if not controller.wait_for_started(name, START_TIMEOUT_S):
                raise RuntimeError(f"{name} did not start within {START_TIMEOUT_S} s")
        clients = {name: handle.dereference() for name, handle in handles.items()}
        ledger = clients["ledger/0"]
        victims = {name: client for name, client in clients.items() if name != "ledger/0"}
        chaos = Chaos(controller, victims, random.Random(seed), interval, kills, seconds)
        began = time.monotonic()
        log(f"chaos on {sorted(victims)}")
        chaos.start()
        while chaos.is_alive():
            if controller.wait(timeout=0.2):  # raises if a node failed for good
                raise RuntimeError("the program ended while its nodes were being killed")
        chaos.join()
        if chaos.error is not None:
            raise chaos.error
        ledger.stop_work()
        result = ledger.result(RESULT_TIMEOUT_S)
        elapsed = time.monotonic() - began
        restarts = controller.restarts()
    finally:
        for client in clients.values():
            lp.courier.close(client)
        controller.stop()
        controller.wait(timeout=START_TIMEOUT_S)
    status = controller.status()
    checks = consistency(result, chaos.kills, restarts, status)
    return {
        "benchmark": "chaos",
        "launch_type": "local_mp",
        "nodes": {"ledger": 1, "producers": producers, "consumers": consumers},
        "restart_policy": dataclasses.asdict(RESTART),
        "work_secs": work_secs, "interval_s": list(interval), "seed": seed,
        "seconds": round(elapsed, 1),
        "kills": len(chaos.kills),
        "kills_by_node": dict(collections.Counter(kill.node for kill in chaos.kills)),
        "recovery_s": {"running_again": _spread([k.running_s for k in chaos.kills]),
                       "first_call": _spread([k.first_call_s for k in chaos.kills])},
        "per_kill": [{**dataclasses.asdict(k), "running_s": round(k.running_s, 3),
                      "first_call_s": round(k.first_call_s, 3)} for k in chaos.kills],
        "work": {"items_confirmed": sum(result["confirmed"]),
                 "per_consumer": result["confirmed"],
                 "producer_calls_retried": result["retries"]},
        "consistency": checks,
        "consistent": checks["consistent"],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0,
                        help="how long the chaos goes on (unless --kills)")
    parser.add_argument("--kills", type=int, default=None, help="this many kills, then stop")
    parser.add_argument("--producers", type=int, default=3)
    parser.add_argument("--consumers", type=int, default=3)
    parser.add_argument("--interval", type=float, nargs=2, default=(0.2, 1.5),
                        metavar=("MIN", "MAX"), help="seconds between kills, drawn uniformly")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.seconds <= 0 or (args.kills is not None and args.kills < 1):
        parser.error("--seconds must be > 0 and --kills >= 1")
    if args.producers < 1 or args.consumers < 1:
        parser.error("--producers and --consumers must be >= 1")
    if not 0 <= args.interval[0] <= args.interval[1]:
        parser.error("--interval needs 0 <= MIN <= MAX")
    report = run(args.seconds, args.kills, args.producers, args.consumers,
                 interval=tuple(args.interval), seed=args.seed)
    log(f"{report['kills']} kills absorbed, consistent: {report['consistent']}")
    print(json.dumps(report, indent=2))
    if not report["consistent"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
