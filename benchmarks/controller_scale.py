"""Benchmark: one real controller under thousands of simulated nodes.

Run: `python -m benchmarks.controller_scale [--sizes 1000,10000] [--secs 20]
[--simulators 2] [--per-connection 25] [--agent-nodes 8] [--transport auto|tcp|grpc]`. Prints
one JSON object on stdout (its last line); progress goes to stderr.

For each size, a controller process (benchmarks/_controller_process.py: the real Controller
of a program of that many nodes, its registry, supervisor, node book and courier server) is
driven by simulator processes (benchmarks/_simulated_nodes.py) whose nodes do what a cluster
node's runner does with it, at the real periods: register and node_started once, then a
heartbeat and a telemetry report every 2 s each and a resolve of a peer every 60 s. Every
size runs twice: nodes calling the controller themselves (`via_agents` false), and through
simulated host agents of `--agent-nodes` nodes each (true), which send one `reports` call
(the nodes' heartbeats too) per host and period, as launch/node_process/host_agent.py
does. Each row of `results`:

* `controller_cpu_cores`: the controller's CPU time over the steady window / its wall time;
* `controller_rss_mb`: its resident memory at the end;
* `simulators_cpu_cores`: the simulators' CPU over the same window (all of them together);
* `register_p99_ms`, `resolve_p50_ms`, `resolve_p99_ms`: as the simulated nodes saw them;
* `call_errors`: calls that failed; `late_calls`: calls that fell due while their sender's
  last one of that kind was unanswered, and were sent a period later (a real sender's loop
  is late so too);
* `failed_nodes`: nodes the controller declared lost (a heartbeat answered too late).

The simulators run on the controller's host, so their calls take the local transport (Unix
sockets) unless `--transport tcp` makes them call as nodes and agents of other hosts do (the
TCP port the controller offers), or `--transport grpc` as they did before that port.
On this machine (2 cores) the simulators share the CPUs with the controller, so latencies
include that contention; the controller's CPU share is its own. Targets (issue 27): at
10,000 nodes through agents, at most 0.5 of a core and a resolve p99 of at most 20 ms.
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

from launchpad.courier._connection import channels as transport_lib

_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_secs(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def run(nodes: int, secs: float, simulators: int, per_connection: int,
        agent_nodes: int, transport: str = "auto") -> dict:
    controller = subprocess.Popen([sys.executable, "-m", "benchmarks._controller_process",
                                   str(nodes)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)
    try:
        address, token = controller.stdout.readline().split()
        share = -(-nodes // simulators)
        sims = [subprocess.Popen(
            [sys.executable, "-m", "benchmarks._simulated_nodes", address, token,
             str(first), str(min(nodes, first + share)), str(per_connection), str(secs),
             str(agent_nodes)],
            stdout=subprocess.PIPE, text=True,
            env={**os.environ, transport_lib.ENV_TRANSPORT: transport})
            for first in range(0, nodes, share)]
        for sim in sims:
            assert sim.stdout.readline().strip() == "registered"
        cpu_before, wall_before = _cpu_secs(controller.pid), time.monotonic()
        sims_before = sum(_cpu_secs(sim.pid) for sim in sims)
        outputs = [json.loads(sim.stdout.readline()) for sim in sims]
        wall = time.monotonic() - wall_before
        cpu = (_cpu_secs(controller.pid) - cpu_before) / wall
        sims_cpu = (sum(_cpu_secs(sim.pid) for sim in sims) - sims_before) / wall
        rss = _rss_mb(controller.pid)
        for sim in sims:
            sim.wait(timeout=60)
        controller.stdin.close()
        failed = json.loads(controller.stdout.readline())["failed_nodes"]
        controller.wait(timeout=60)
    finally:
        if controller.poll() is None:
            controller.kill()
            controller.wait()
    register = [v for out in outputs for v in out["register"]]
    resolve = [v for out in outputs for v in out["resolve"]]
    return {"nodes": nodes, "via_agents": bool(agent_nodes), "transport": transport,
            "controller_cpu_cores": round(cpu, 3),
            "controller_rss_mb": round(rss, 1),
            "simulators_cpu_cores": round(sims_cpu, 3),
            "resolve_p50_ms": round(statistics.median(resolve), 2) if resolve else None,
            "resolve_p99_ms": _percentile(resolve, 0.99),
            "register_p99_ms": _percentile(register, 0.99), "resolves": len(resolve),
            "call_errors": sum(out["errors"] for out in outputs),
            "late_calls": sum(out["late"] for out in outputs),
            "first_error": next((o["first_error"] for o in outputs if o["first_error"]), ""),
            "failed_nodes": failed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--secs", type=float, default=20.0)
    parser.add_argument("--simulators", type=int, default=2)
    parser.add_argument("--per-connection", type=int, default=25)
    parser.add_argument("--agent-nodes", type=int, default=8)
    parser.add_argument("--transport", choices=["auto", "tcp", "grpc"], default="auto",
                        help="the simulators' transport (auto: local, on this host; tcp: "
                             "as agents of other hosts call)")
    args = parser.parse_args()
    results = []
    for nodes in (int(n) for n in args.sizes.split(",")):
        for agent_nodes in (0, args.agent_nodes):
            print(f"controller_scale: {nodes} nodes, agents of {agent_nodes or 'none'}",
                  file=sys.stderr, flush=True)
            results.append(run(nodes, args.secs, args.simulators, args.per_connection,
                               agent_nodes, args.transport))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    print(json.dumps({"benchmark": "controller_scale", "python": platform.python_version(),
                      "cpus": os.cpu_count(), "secs": args.secs,
                      "per_connection": args.per_connection,
                      "agent_nodes": args.agent_nodes, "results": results}))


if __name__ == "__main__":
    main()
