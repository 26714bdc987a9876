"""Simulated nodes of benchmarks/controller_scale.py: `python -m benchmarks._simulated_nodes
ADDRESS TOKEN FIRST END PER_CONNECTION SECS AGENT_NODES`.

Nodes node/FIRST..END-1 do what a cluster node's runner does with its controller, at the
real periods: `register` and `node_started` once, then for SECS seconds a heartbeat and a
telemetry report every 2 s each (spread over the period), and a `resolve` of a peer every
60 s (a handle resolves once, and again only when its server moves). With AGENT_NODES = 0
each node sends its own `heartbeat` and `report`, and a connection is shared by
PER_CONNECTION nodes (a real node has its own; thousands of connections would measure this
process's threads more than the controller). With AGENT_NODES = K, nodes go by simulated
host agents of K nodes, each with its connection, sending one `reports` call of its K
nodes per period (their heartbeats too), as launch/host_agent.py does. Prints one JSON
line: the latencies (ms) of register and resolve, and how many calls failed.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time

from launchpad import control, telemetry
from launchpad.courier.client import Client

PERIOD_SECS = 2.0  # spec.CLUSTER_HEARTBEAT_SECS and telemetry.REPORT_SECS
RESOLVE_EVERY_SECS = 60.0
TICK_SECS = 0.05


class _Latencies:
    def __init__(self):
        self.lock = threading.Lock()
        self.values: dict[str, list[float]] = {"register": [], "resolve": []}
        self.errors = 0
        self.first_error = ""

    def timed(self, kind: str | None, future) -> None:
        started = time.perf_counter()

        def done(f) -> None:
            with self.lock:
                if f.exception() is not None:
                    self.errors += 1
                    self.first_error = self.first_error or repr(f.exception())[:300]
                elif kind is not None:
                    self.values[kind].append((time.perf_counter() - started) * 1000)
        future.add_done_callback(done)


def main(address: str, token: str, first: int, end: int, per_connection: int,
         secs: float, agent_nodes: int) -> None:
    per_connection = agent_nodes or per_connection
    clients = [Client(address, token=token) for _ in range(first, end, per_connection)]
    for client in clients:
        client.call("hello", control.PROTOCOL_VERSION)
    latencies = _Latencies()
    nodes = list(range(first, end))
    client_of = {i: clients[(i - first) // per_connection] for i in nodes}
    pending = []
    for i in nodes:
        future = client_of[i].submit("register", "node", i, "", f"10.0.0.1:{i}", "sim")
        latencies.timed("register", future)
        pending.append(future)
        pending.append(client_of[i].submit("node_started", "node", i, "r0", "sim", i, True))
    for future in pending:
        future.result(timeout=600)
    print("registered", flush=True)
    rng = random.Random(first)
    phase = {i: rng.random() * PERIOD_SECS for i in nodes}
    resolve_phase = {i: rng.random() * RESOLVE_EVERY_SECS for i in nodes}
    started = time.monotonic()
    last = 0.0
    agents = [nodes[k:k + agent_nodes] for k in range(0, len(nodes), agent_nodes or 1)]
    while (now := time.monotonic() - started) < secs:
        for group in agents if agent_nodes else ():
            head = group[0]  # the agent's period starts at its first node's phase
            if int((now - phase[head]) // PERIOD_SECS) != int((last - phase[head])
                                                                // PERIOD_SECS):
                client = client_of[head]  # every node sent a sample: one call is enough
                latencies.timed(None, client.submit("reports", [
                    ["node", i, "r0", telemetry.NodeSample(1.0, 1 << 26, {})] for i in group]))
        for i in nodes:
            if not agent_nodes and (int((now - phase[i]) // PERIOD_SECS)
                                    != int((last - phase[i]) // PERIOD_SECS)):
                latencies.timed(None, client_of[i].submit("heartbeat", "node", i, "r0"))
                latencies.timed(None, client_of[i].submit(
                    "report", "node", i, "r0", telemetry.NodeSample(1.0, 1 << 26, {})))
            if (int((now - resolve_phase[i]) // RESOLVE_EVERY_SECS)
                    != int((last - resolve_phase[i]) // RESOLVE_EVERY_SECS)):
                peer = rng.choice(nodes)
                latencies.timed("resolve", client_of[i].submit("resolve", "node", peer, "",
                                                                10.0))
        last = now
        time.sleep(TICK_SECS)  # the nodes' clock: calls fall due by the period, not by events
    time.sleep(1.0)  # the last calls' answers (a clock as well)
    with latencies.lock:
        print(json.dumps({**latencies.values, "errors": latencies.errors,
                          "first_error": latencies.first_error}), flush=True)
    for client in clients:
        client.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
         float(sys.argv[6]), int(sys.argv[7]))
