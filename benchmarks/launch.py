"""Benchmark: how fast programs of many CourierNodes start and stop, and what they weigh.

Run: `python -m benchmarks.launch [--sizes 1,10,50,100] [--rounds N]`. Prints one JSON object
on stdout; progress goes to stderr.

For programs of 1, 10, 50 and 100 CourierNodes, under each way of launching:

* `ready_s`: seconds from `lp.launch` until every node has answered a ping, asked from the
  launching process through the nodes' handles (all pings in flight at once);
* `stop_s`: seconds from `controller.stop()` until `wait()` returns, i.e. until every node
  process has ended (for local_mt: every node thread);
* `pss_mb` / `rss_mb`: memory of the node processes while they run. PSS (proportional set
  size) counts a page shared by k processes as 1/k in each, so its sum is what the nodes
  really occupy; the RSS sum counts shared pages once per process and overstates it.

Launches compared in the same run:
* `local_mt`: every node a thread of this process (the floor);
* `local_mp`: every node a fork of the launch's fork server (the default);
* `local_mp_fresh`: every node a fresh interpreter (what a group with its own `interpreter`
  gets), the baseline the fork server is there to beat;
* `ray`: every node a Ray actor (launch_type="ray"), on a Ray this benchmark starts on this
  machine (`ray.init(address="local")`) and shares with
* `ray_actors`: bare Ray actors doing what the nodes do - created, then pinged, all at once;
  then killed, stopped when every actor's process has ended - what Ray itself costs, the
  baseline `ray` is compared with (`ray_vs_bare_actors`: ready_s and stop_s ratios; aim 1.2).

Reference, measured on this kind of machine (2 cores) for DeepMind Launchpad 0.5.2, local_mp
with output_to_files: 10 nodes ready in ~2.3 s; 100 nodes ready in ~26 s with ~9 GB resident.
Targets for 100 nodes under local_mp (issue 15): ready <= 2 s, stop < 2 s, <= 600 MB PSS in total.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import select
import statistics
import sys
import time

import launchpad as lp

_KINDS = ("local_mt", "local_mp", "local_mp_fresh", "ray_actors", "ray")


class Pong:
    def ping(self) -> str:
        return "pong"


def _memory_mb(pids: list[int]) -> tuple[float, float]:
    """(PSS, RSS) totals in MB of `pids`, from /proc/PID/smaps_rollup."""
    pss = rss = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        pss += int(line.split()[1])
                    elif line.startswith("Rss:"):
                        rss += int(line.split()[1])
        except OSError:
            pass
    return round(pss / 1024, 1), round(rss / 1024, 1)


class _BareActor:
    def ping(self) -> tuple[str, int]:
        return "pong", os.getpid()


def _wait_gone(pids: list[int], timeout: float) -> None:
    """Waits for the processes `pids` to end (pidfds: an event), up to `timeout` s."""
    fds = []
    for pid in pids:
        try:
            fds.append(os.pidfd_open(pid))
        except OSError:
            pass  # gone already
    deadline = time.monotonic() + timeout
    try:
        while fds and time.monotonic() < deadline:
            for fd in select.select(fds, [], [], deadline - time.monotonic())[0]:
                fds.remove(fd)
                os.close(fd)
    finally:
        for fd in fds:
            os.close(fd)


def _measure_bare_actors(size: int) -> dict:
    import ray
    remote = ray.remote(_BareActor).options(num_cpus=0, max_concurrency=2)
    started = time.perf_counter()
    actors = [remote.remote() for _ in range(size)]
    answers = ray.get([a.ping.remote() for a in actors], timeout=120)
    assert all(answer == "pong" for answer, _ in answers)
    ready = time.perf_counter() - started
    pss, rss = _memory_mb([pid for _, pid in answers])
    stopping = time.perf_counter()
    for actor in actors:
        ray.kill(actor)
    _wait_gone([pid for _, pid in answers], 120)
    stop = time.perf_counter() - stopping
    return {"ready_s": round(ready, 3), "stop_s": round(stop, 3), "pss_mb": pss,
            "rss_mb": rss}


def _measure(kind: str, size: int) -> dict:
    if kind == "ray_actors":
        return _measure_bare_actors(size)
    program = lp.Program(f"bench_{kind}_{size}")
    with program.group("pong"):
        handles = [program.add_node(lp.CourierNode(Pong)) for _ in range(size)]
    launch_type = {"local_mt": "local_mt", "ray": "ray"}.get(kind, "local_mp")
    options: dict = {"launch_type": launch_type, "termination_notice_secs": 10}
    if kind == "local_mp_fresh":
        options["local_resources"] = {"pong": lp.PythonProcess(interpreter=sys.executable)}
    started = time.perf_counter()
    controller = lp.launch(program, **options)
    clients = [h.dereference() for h in handles]
    futures = [c.futures.ping() for c in clients]
    assert all(f.result(timeout=120) == "pong" for f in futures)
    ready = time.perf_counter() - started
    pids = controller.node_pids() if kind == "ray" else controller.pids()
    pss, rss = _memory_mb(list(pids.values()))
    for client in clients:
        lp.courier.close(client)
    stopping = time.perf_counter()
    controller.stop()
    assert controller.wait(timeout=120)
    stop = time.perf_counter() - stopping
    result = {"ready_s": round(ready, 3), "stop_s": round(stop, 3)}
    if kind != "local_mt":
        result.update(pss_mb=pss, rss_mb=rss)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,50,100")
    parser.add_argument("--rounds", type=int, default=1,
                        help="launches per size and kind, interleaved; the median is reported")
    parser.add_argument("--kinds", default=",".join(_KINDS))
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    kinds = args.kinds.split(",")
    report: dict = {"machine": {"python": platform.python_version(),
                                "cpus": os.cpu_count()}, "results": {}}
    on_ray = any(kind.startswith("ray") for kind in kinds)
    if on_ray:  # one Ray for both, started here: the launches join this process's connection
        import ray
        ray.init(address="local", include_dashboard=False, logging_level="error",
                 log_to_driver=False)  # stdout is the JSON report
    try:
        _run_all(sizes, kinds, args.rounds, report)
    finally:
        if on_ray:
            ray.shutdown()
    print(json.dumps(report, indent=2))


def _run_all(sizes: list[int], kinds: list[str], rounds: int, report: dict) -> None:
    """Each size: `rounds` rounds of every kind, interleaved, in an order reversed every other
    round (what one launch leaves - Ray's pool of idle workers, warm caches - helps the next
    one, so no kind always goes first); the median of each."""
    for size in sizes:
        runs: dict[str, list[dict]] = {kind: [] for kind in kinds}
        for round_number in range(rounds):
            for kind in kinds if round_number % 2 == 0 else kinds[::-1]:
                print(f"{kind} x{size} (round {round_number + 1}) ...", file=sys.stderr,
                      flush=True)
                runs[kind].append(_measure(kind, size))
        for kind, measured in runs.items():
            report["results"].setdefault(str(size), {})[kind] = {
                key: statistics.median(run[key] for run in measured) for key in measured[0]}
    largest = report["results"].get("100", {}).get("local_mp")
    if largest:
        report["targets_100_local_mp"] = {
            "ready_at_most_2s": largest["ready_s"] <= 2, "stop_under_2s": largest["stop_s"] < 2,
            "pss_at_most_600mb": largest["pss_mb"] <= 600}
        fresh = report["results"]["100"].get("local_mp_fresh")
        if fresh:
            report["fork_server_speedup_100"] = round(fresh["ready_s"] / largest["ready_s"], 2)
    ratios = {}
    for size, results in report["results"].items():
        if "ray" in results and "ray_actors" in results:
            ray_run, bare = results["ray"], results["ray_actors"]
            ratios[size] = {key: round(ray_run[key] / bare[key], 2)
                            for key in ("ready_s", "stop_s") if bare[key]}
    if ratios:
        report["ray_vs_bare_actors"] = ratios


if __name__ == "__main__":
    main()
