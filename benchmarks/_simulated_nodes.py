"""Simulated nodes of benchmarks/controller_scale.py: `python -m benchmarks._simulated_nodes
ADDRESS TOKEN FIRST END PER_CONNECTION SECS AGENT_NODES`.

Nodes node/FIRST..END-1 do what a cluster node's runner does with its controller, at the
real periods: `register` and `node_started` once, then for SECS seconds a heartbeat and a
telemetry report every 2 s each (spread over the period), and a `resolve` of a peer every
60 s (a handle resolves once, and again only when its server moves). With AGENT_NODES = 0
each node sends its own `heartbeat` and `report`, and a connection is shared by
PER_CONNECTION nodes. With AGENT_NODES = K, nodes go by simulated host agents of K nodes,
each with its connection, sending one `reports` call of its K nodes per period (their
heartbeats too), as launch/node_process/host_agent.py does. As a runner's and an agent's loops do, a
sender has at most one call of each kind in flight: one that falls due before the last is
answered is sent a period later, and counted `late` (without this bound, an overloaded
controller would see calls pile up that no real node sends).

The simulator is one event loop, so that what it measures is the controller and not itself:
courier's Client gives each connection threads of its own, and at 12,500 agents those
threads took 60 times the controller's CPU. Each connection is one courier stream on the
transport a node of this host or of another would use (`LAUNCHPAD_COURIER_TRANSPORT`:
`tcp`, one connection each to the TCP port the server offers, as agents of other hosts
call; `grpc`, one gRPC connection each; otherwise the server's Unix socket), carrying courier's
own messages (serialization.py) under the stream's rule: a message is sent when every call
of the last one is answered, and the calls that came meanwhile travel together in the
next. Prints "registered" once every node has, then one JSON line: the latencies (ms) of
register and resolve, how many calls failed (and the first failure), and how many were late.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import json
import random
import sys
import time

import grpc

from launchpad import control, telemetry
from launchpad.courier._connection import channels
from launchpad.courier._grpc import grpc_client, limits
from launchpad.courier._process import hosts
from launchpad.courier._sockets import records, socket_wire, tcp_sockets, unix_sockets
from launchpad.courier._wire import serialization
from launchpad.courier._wire.serialization import Kind

PERIOD_SECS = 2.0  # spec.CLUSTER_HEARTBEAT_SECS and telemetry.REPORT_SECS
RESOLVE_EVERY_SECS = 60.0
# Connections opened at once, as a host's processes open theirs: a server lets at most
# 1,024 connections wait for their hello (socket_server.py), and 6,250 connected in one
# step of the loop would all wait.
_CONNECTING = 256
_ids = itertools.count(1)


class _LocalStream:
    """A courier stream on the server's Unix socket (unix_sockets.py's records)."""

    def __init__(self, address: str, token: str):
        host, port = hosts.keys(address)[0]
        self._path = unix_sockets.socket_path(unix_sockets.socket_dir(), host, port, None)
        self._hello = socket_wire.hello(token, "")
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_unix_connection(self._path)

    async def send(self, message: bytes) -> None:
        pieces = [records.pack_header(socket_wire.MESSAGE, len(message)), message]
        if self._writer is None:
            self._reader, self._writer = await self._open()
            pieces[:0] = [records.pack_header(socket_wire.HELLO, len(self._hello)),
                          self._hello]
            self._writer.writelines(pieces)
            if (await self._record())[0] != socket_wire.ANSWER:
                raise ConnectionError("the server did not answer the hello")
        else:
            self._writer.writelines(pieces)

    async def receive(self) -> bytes:
        kind, body = await self._record()
        if kind != socket_wire.MESSAGE:
            raise ConnectionError(f"the stream ended: {socket_wire.status_of(body)}")
        return body

    async def _record(self) -> tuple[int, bytes]:
        kind, length = records.header(await self._reader.readexactly(records.HEADER_SIZE))
        return kind, await self._reader.readexactly(length)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


class _TcpStream(_LocalStream):
    """The same records on the server's TCP port (tcp_sockets.py), as an agent of another
    host calls (`tcp_port`: the port the server offers)."""

    tcp_port = 0

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.tcp_port)
        tcp_sockets.tune(writer.get_extra_info("socket"))
        return reader, writer


def _offered_tcp_port(address: str) -> int:
    channel = grpc_client.GrpcChannel(address)
    try:
        if not channel.wait_until_ready(30) or (port := channel.offered_tcp_port()) is None:
            raise ConnectionError(f"the controller at {address} offers no TCP port")
        return port
    finally:
        channel.close()


class _GrpcStream:
    """A courier stream on a gRPC connection of its own, as a node of another host has."""

    def __init__(self, address: str, token: str):
        self._channel = grpc.aio.insecure_channel(
            address, options=[("grpc.use_local_subchannel_pool", 1)])
        self._call = self._channel.stream_stream(grpc_client.STREAM_METHOD)(
            metadata=((grpc_client.TOKEN_METADATA_KEY, token),))

    async def send(self, message: bytes) -> None:
        await self._call.write(message)

    async def receive(self) -> bytes:
        message = await self._call.read()
        if message is grpc.aio.EOF:
            raise ConnectionError(f"the stream ended: {await self._call.code()}")
        return message

    def close(self) -> None:
        self._call.cancel()


class _Connection:
    """One stream and the calls queued on it (see the module doc)."""

    def __init__(self, stream):
        self._stream = stream
        self._broken: Exception | None = None  # why the stream ended: later calls fail so
        self._queue: list[tuple[serialization.OutFrame, asyncio.Future]] = []
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._drive())

    def call(self, method: str, parts: list) -> asyncio.Future:
        """Queues a call whose arguments are pickled already; its future gets the result."""
        future = asyncio.get_running_loop().create_future()
        if self._broken is not None:
            future.set_exception(self._broken)
            return future
        self._queue.append((serialization.encode_frame(Kind.CALL, next(_ids), method, parts),
                            future))
        self._wake.set()
        return future

    async def _drive(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._queue = self._queue, []
            waiting = {frame.call_id: future for frame, future in batch}
            try:
                await self._stream.send(serialization.join_message([f for f, _ in batch]))
                while waiting:
                    for frame in serialization.decode_message(await self._stream.receive()):
                        future = waiting.pop(frame.call_id)
                        if frame.kind == Kind.RESULT:
                            future.set_result(frame.load())
                        else:
                            future.set_exception(serialization.load_exception(frame))
            except Exception as e:  # noqa: BLE001 - the stream broke: its calls fail
                self._broken = e
                for future in [*waiting.values(), *(f for _, f in self._queue)]:
                    future.set_exception(e)
                return

    def close(self) -> None:
        self._task.cancel()
        self._stream.close()


class _Senders:
    """The simulated senders' calls: their latencies, failures, lateness and those in flight."""

    def __init__(self):
        self.values: dict[str, list[float]] = {"register": [], "resolve": []}
        self.errors = 0
        self.first_error = ""
        self.late = 0
        self.in_flight: set[asyncio.Future] = set()
        self._busy: set = set()  # (method, sender) of the calls in flight

    def send(self, connection: _Connection, method: str, sender: int, parts: list,
             timed: str | None = None) -> asyncio.Future | None:
        """Calls `method` for `sender`, unless its last one is unanswered (then late)."""
        key = (method, sender)
        if key in self._busy:
            self.late += 1
            return None
        self._busy.add(key)
        started = time.perf_counter()
        future = connection.call(method, parts)
        self.in_flight.add(future)

        def done(f: asyncio.Future) -> None:
            self.in_flight.discard(f)
            self._busy.discard(key)
            if f.exception() is not None:
                self.errors += 1
                self.first_error = self.first_error or repr(f.exception())[:300]
            elif timed is not None:
                self.values[timed].append((time.perf_counter() - started) * 1000)
        future.add_done_callback(done)
        return future


def _arguments(method: str, *args) -> list:
    return serialization.dumps_call_arguments(method, args, {})


async def simulate(address: str, token: str, first: int, end: int, per_connection: int,
                   secs: float, agent_nodes: int) -> dict:
    kind = channels.mode_of(None)
    stream_class = {"grpc": _GrpcStream, "tcp": _TcpStream}.get(kind, _LocalStream)
    if kind == "tcp":
        _TcpStream.tcp_port = _offered_tcp_port(address)
    per_connection = agent_nodes or per_connection
    connections = [_Connection(stream_class(address, token))
                   for _ in range(first, end, per_connection)]
    hello = _arguments("hello", control.PROTOCOL_VERSION)
    for k in range(0, len(connections), _CONNECTING):
        await asyncio.gather(*(c.call("hello", hello) for c in connections[k:k + _CONNECTING]))
    senders = _Senders()
    nodes = list(range(first, end))
    connection_of = {i: connections[(i - first) // per_connection] for i in nodes}
    started = [senders.send(connection_of[i], "register", i,
                            _arguments("register", "node", i, "", f"10.0.0.1:{i}", "sim"),
                            timed="register") for i in nodes]
    started += [connection_of[i].call("node_started", _arguments(
        "node_started", "node", i, "r0", "sim", i, True)) for i in nodes]
    await asyncio.gather(*started)
    print("registered", flush=True)
    rng = random.Random(first)
    sample = telemetry.NodeSample(1.0, 1 << 26, {})
    # Every call a sender repeats, pickled once (its arguments do not change).
    agents = [nodes[k:k + agent_nodes] for k in range(0, len(nodes), agent_nodes or 1)]
    reports = [_arguments("reports", [["node", i, "r0", sample] for i in group])
               for group in agents] if agent_nodes else []
    # What falls due when: (seconds from the start, what, whose), in a heap, so that each
    # tick costs the calls due in it, not a look at every node.
    due = [(rng.random() * PERIOD_SECS, "agent", k) for k in range(len(agents))] \
        if agent_nodes else [(rng.random() * PERIOD_SECS, "node", i) for i in nodes]
    due += [(rng.random() * RESOLVE_EVERY_SECS, "resolve", i) for i in nodes]
    heapq.heapify(due)
    began = time.monotonic()
    while (now := time.monotonic() - began) < secs:
        while due[0][0] <= now:
            at, what, who = heapq.heappop(due)
            if what == "agent":  # every node of it sent a sample: one call is enough
                senders.send(connection_of[agents[who][0]], "reports", who, reports[who])
            elif what == "node":
                senders.send(connection_of[who], "heartbeat", who,
                             _arguments("heartbeat", "node", who, "r0"))
                senders.send(connection_of[who], "report", who,
                             _arguments("report", "node", who, "r0", sample))
            else:
                senders.send(connection_of[who], "resolve", who, _arguments(
                    "resolve", "node", rng.choice(nodes), "", 10.0), timed="resolve")
            period = RESOLVE_EVERY_SECS if what == "resolve" else PERIOD_SECS
            heapq.heappush(due, (at + period, what, who))
        # Until the next call falls due: calls go out spread as their periods spread them
        # (a clock that ticked every 50 ms sent them in bursts, which queued at the server).
        await asyncio.sleep(max(0.0, due[0][0] - (time.monotonic() - began)))
    if senders.in_flight:  # the answers of the last calls
        await asyncio.wait(list(senders.in_flight), timeout=60)
    for connection in connections:
        connection.close()
    return {**senders.values, "errors": senders.errors, "late": senders.late,
            "first_error": senders.first_error}


def main(address: str, token: str, first: int, end: int, per_connection: int,
         secs: float, agent_nodes: int) -> None:
    limits.raise_open_files_limit()  # a socket per connection
    result = asyncio.run(simulate(address, token, first, end, per_connection, secs,
                                  agent_nodes))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
         float(sys.argv[6]), int(sys.argv[7]))
