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
nodes per period (their heartbeats too), as launch/host_agent.py does. As a runner's and
an agent's loops do, a sender has at most one call of each kind in flight: one that falls
due before the last is answered is sent a period later, and counted `late` (without this
bound, an overloaded controller would see calls pile up that no real node sends). Prints
one JSON line: the latencies (ms) of register and resolve, how many calls failed, and how
many were late.
"""

from __future__ import annotations

import concurrent.futures
import heapq
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


class _Senders:
    """The simulated senders' calls: their latencies, failures, lateness and those in flight."""

    def __init__(self):
        self.lock = threading.Lock()
        self.values: dict[str, list[float]] = {"register": [], "resolve": []}
        self.errors = 0
        self.first_error = ""
        self.late = 0
        self.in_flight: dict = {}  # future -> (method, sender)
        self._busy: set = set()  # (method, sender) of the calls in flight

    def send(self, client: Client, method: str, sender: int, *args,
             timed: str | None = None) -> None:
        """Submits `method` for `sender`, unless its last one is unanswered (then late)."""
        key = (method, sender)
        with self.lock:
            if key in self._busy:
                self.late += 1
                return
            self._busy.add(key)
        self.timed(timed, client.submit(method, *args), key)

    def timed(self, kind: str | None, future, key: tuple = ()) -> None:
        started = time.perf_counter()
        with self.lock:
            self.in_flight[future] = key

        def done(f) -> None:
            with self.lock:
                self._busy.discard(self.in_flight.pop(f, None))
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
    senders = _Senders()
    nodes = list(range(first, end))
    client_of = {i: clients[(i - first) // per_connection] for i in nodes}
    pending = []
    for i in nodes:
        future = client_of[i].submit("register", "node", i, "", f"10.0.0.1:{i}", "sim")
        senders.timed("register", future)
        pending.append(future)
        pending.append(client_of[i].submit("node_started", "node", i, "r0", "sim", i, True))
    for future in pending:
        future.result(timeout=600)
    print("registered", flush=True)
    rng = random.Random(first)
    # What falls due when: (seconds from the start, what, whose). A heap, so that each tick
    # costs the calls due in it, not a look at every node (at 10,000 nodes that look took
    # this process's CPU, and so the latencies it measures).
    agents = [nodes[k:k + agent_nodes] for k in range(0, len(nodes), agent_nodes or 1)]
    due = [(rng.random() * PERIOD_SECS, "agent", k) for k in range(len(agents))] \
        if agent_nodes else [(rng.random() * PERIOD_SECS, "node", i) for i in nodes]
    due += [(rng.random() * RESOLVE_EVERY_SECS, "resolve", i) for i in nodes]
    heapq.heapify(due)
    sample = telemetry.NodeSample(1.0, 1 << 26, {})
    started = time.monotonic()
    while (now := time.monotonic() - started) < secs:
        while due[0][0] <= now:
            at, kind, who = heapq.heappop(due)
            if kind == "agent":  # every node of it sent a sample: one call is enough
                group = agents[who]
                senders.send(client_of[group[0]], "reports", who,
                             [["node", i, "r0", sample] for i in group])
            elif kind == "node":
                senders.send(client_of[who], "heartbeat", who, "node", who, "r0")
                senders.send(client_of[who], "report", who, "node", who, "r0", sample)
            else:
                senders.send(client_of[who], "resolve", who, "node", rng.choice(nodes), "",
                             10.0, timed="resolve")
            period = RESOLVE_EVERY_SECS if kind == "resolve" else PERIOD_SECS
            heapq.heappush(due, (at + period, kind, who))
        time.sleep(TICK_SECS)  # the nodes' clock: calls fall due by the period, not by events
    with senders.lock:
        last = list(senders.in_flight)
    concurrent.futures.wait(last, timeout=60)  # the answers of the last calls
    with senders.lock:
        print(json.dumps({**senders.values, "errors": senders.errors, "late": senders.late,
                          "first_error": senders.first_error}), flush=True)
    for client in clients:
        client.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
         float(sys.argv[6]), int(sys.argv[7]))
