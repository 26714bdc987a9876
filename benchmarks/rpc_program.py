"""The RPC benchmark as a Launchpad program: one program, run unchanged on either Launchpad.

Run: `python -m benchmarks.rpc_program --mode mp|mt --out PATH` from the project root, by
this project's interpreter or by DeepMind Launchpad 0.5.2's (Python 3.10, its courier in C++;
`../shared/bench/` says how to make one). The program is what users write: a CourierNode
serving `Echo` and a PyNode that receives its handle and measures calls through it. Under
`mp` the two nodes are processes of this host; under `mt`, threads of one process (colocated
nodes). The client node writes one JSON object of raw figures to PATH, and the program stops.

Each figure, measured from the client node:
* `latency_us`: sequential round trips, p50 and p99, for None, 1 KiB of bytes, 1 MiB of
  bytes in and a float32 array out (`1mib_returned`: an array as an argument hangs
  Launchpad 0.5.2, google-deepmind/launchpad#28) and, on this project only, a 1 MiB array
  both ways (`1mib_both`);
* `threads_calls_per_s`: 4 threads, each with a client of its own, sequential small calls;
* `shared_client_calls_per_s`: 16 threads sharing one client, sequential small calls;
* `in_flight_calls_per_s`: one thread keeping 16 small calls in flight through futures;
* `in_flight_64_calls_per_s`: the same with 64 calls in flight.

Only the standard library, numpy and `launchpad` are imported, and nothing newer than
Python 3.10, so the one file serves both systems.
"""

import argparse
import json
import os
import pickle
import threading
import time

import numpy as np

import launchpad as lp

SMALL = b"0123456789abcdef"
ARRAY_ELEMENTS = 262144  # float32: 1 MiB


class Echo:
    def ping(self, value):
        return value

    def as_array(self, data):
        return np.frombuffer(data, np.float32)


def _is_launchpad_0_5() -> bool:
    """Whether DeepMind's Launchpad runs this: its courier is a package of its own (ours is
    launchpad.courier; our top-level `courier` is only Launchpad's name for it)."""
    import importlib.util
    return importlib.util.find_spec("launchpad.courier") is None


def _another_client(client):
    """A client of the same server with a connection of its own."""
    if _is_launchpad_0_5():
        import courier
        return courier.Client(client.address)
    return pickle.loads(pickle.dumps(client))  # a fresh connection, the same options


def _percentiles(samples: list) -> dict:
    p50, p99 = np.percentile(np.array(samples) * 1e6, [50, 99])
    return {"p50": round(float(p50), 1), "p99": round(float(p99), 1)}


def _latency(call, argument, calls: int, warmup: int) -> dict:
    for _ in range(warmup):
        call(argument)
    clock = time.perf_counter
    samples = []
    for _ in range(calls):
        start = clock()
        call(argument)
        samples.append(clock() - start)
    return _percentiles(samples)


def _threads(client, threads: int, seconds: float, own_clients: bool = True) -> float:
    counts = [0] * threads
    stop = threading.Event()
    ready = threading.Barrier(threads + 1)

    def worker(index: int) -> None:
        own = _another_client(client) if own_clients else client
        for _ in range(20):
            own.ping(SMALL)
        ready.wait()
        done = 0
        while not stop.is_set():
            own.ping(SMALL)
            done += 1
        counts[index] = done

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in workers:
        thread.start()
    ready.wait()
    start = time.perf_counter()
    stop.wait(seconds)
    stop.set()
    for thread in workers:
        thread.join()
    return sum(counts) / (time.perf_counter() - start)


def _in_flight(client, window: int, seconds: float) -> float:
    slots = threading.Semaphore(window)
    lock = threading.Lock()
    done = [0]

    def finished(_future) -> None:
        with lock:
            done[0] += 1
        slots.release()

    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        slots.acquire()
        client.futures.ping(SMALL).add_done_callback(finished)
    for _ in range(window):
        slots.acquire()
    return done[0] / (time.perf_counter() - start)


def measure(client, calls: int, seconds: float) -> dict:
    array = np.random.default_rng(0).random(ARRAY_ELEMENTS).astype(np.float32)
    payloads = {
        "none": (client.ping, None),
        "1kib": (client.ping, os.urandom(1024)),
        "1mib_returned": (client.as_array, array.tobytes()),
    }
    if not _is_launchpad_0_5():
        payloads["1mib_both"] = (client.ping, array)
    # The program is still starting around its first calls (its other node, the launcher):
    # half a second of calls first, so that the first figure measures what the others do.
    warm_until = time.perf_counter() + 0.5
    while time.perf_counter() < warm_until:
        client.ping(None)
    latency = {}
    for name, (call, argument) in payloads.items():
        large = name.startswith("1mib")
        latency[name] = _latency(call, argument, calls // 10 if large else calls,
                                 warmup=10 if large else 100)
    figures = {"latency_us": latency,
               "threads_calls_per_s": round(_threads(client, 4, seconds))}
    if not getattr(type(client), "one_thread_only", False):  # (a raw socket's is)
        figures["shared_client_calls_per_s"] = round(_threads(client, 16, seconds,
                                                              own_clients=False))
    if client.futures is not None:  # (a raw socket baseline has none)
        figures["in_flight_calls_per_s"] = round(_in_flight(client, 16, seconds))
        figures["in_flight_64_calls_per_s"] = round(_in_flight(client, 64, seconds))
    return figures


def client_node(server, out: str, calls: int, seconds: float) -> None:
    figures = measure(server, calls, seconds)
    with open(out, "w") as f:
        json.dump(figures, f)
    lp.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["mp", "mt"], required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    program = lp.Program("rpc_benchmark")
    with program.group("server"):
        server = program.add_node(lp.CourierNode(Echo))
    with program.group("client"):
        program.add_node(lp.PyNode(client_node, server, args.out, args.calls, args.seconds))
    if args.mode == "mp":
        launched = lp.launch(program, launch_type=lp.LaunchType.LOCAL_MULTI_PROCESSING,
                             terminal="output_to_files")
    else:
        launched = lp.launch(program, launch_type=lp.LaunchType.LOCAL_MULTI_THREADING)
    launched.wait()


if __name__ == "__main__":
    main()
