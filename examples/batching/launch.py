"""Batching: one server answers many clients' single calls with one call per batch.

`Server.act` is decorated with `@lp.batched_handler(batch_size=BATCH_SIZE)`: each client sends
one observation per call, the server collects concurrent calls until BATCH_SIZE have arrived,
runs `act` once on the stacked `[batch, OBS_DIM]` array (a tiny linear policy, `obs @ W`) and
sends each caller its own row of the result. Batched handlers answer with futures, so waiting
for a batch to fill holds no server thread.

Each `client` node (a PyNode) submits all its calls at once through `client.futures`, checks
every answer against `obs @ W` computed locally, prints how many calls it made and reports to
the `coordinator`. Once every client has reported, the coordinator asks the server how many
batches it ran, prints the average batch size and calls `lp.stop()`.

The batching does not depend on timing: a batch runs when full, or only once BATCH_TIMEOUT_SECS
have passed since its first call. With the default flags there are 4 x 8 = 32 calls, a multiple
of BATCH_SIZE, all arriving well within the timeout, so the server runs 4 full batches of 8.
With a total that is not a multiple (try --calls_per_client=5), the last batch runs partial
after the timeout.

    python -m examples.batching.launch --lp_launch_type=local_mt --num_clients=4
"""

from __future__ import annotations

import threading

import numpy as np
from absl import app, flags

import launchpad as lp

_NUM_CLIENTS = flags.DEFINE_integer("num_clients", 4, "How many client nodes.", lower_bound=1)
_CALLS_PER_CLIENT = flags.DEFINE_integer(
    "calls_per_client", 8, "How many concurrent calls each client makes.", lower_bound=1)

BATCH_SIZE = 8
# A full batch runs at once; only a batch that cannot fill (the calls ran out, e.g. with
# --calls_per_client=5) waits this long, then runs partial. Generous, so that on a busy machine
# calls that straggle in still join their batch and the default run stays 4 full batches.
BATCH_TIMEOUT_SECS = 5.0
OBS_DIM = 4
ACTION_DIM = 2


def policy_weights() -> np.ndarray:
    """The policy's fixed weights W, so clients can check the server's answers."""
    return np.arange(OBS_DIM * ACTION_DIM, dtype=np.float64).reshape(OBS_DIM, ACTION_DIM)


class Server:
    """Serves a linear policy; counts the calls and batches it ran."""

    def __init__(self):
        self._weights = policy_weights()
        self._lock = threading.Lock()
        self._calls = 0
        self._batches = 0

    @lp.batched_handler(batch_size=BATCH_SIZE, timeout=BATCH_TIMEOUT_SECS)
    def act(self, observation: np.ndarray) -> np.ndarray:
        """Callers send one `[OBS_DIM]` observation; here it arrives as `[batch, OBS_DIM]`."""
        with self._lock:
            self._calls += len(observation)
            self._batches += 1
        return observation @ self._weights  # [batch, ACTION_DIM]: row i goes to caller i

    def stats(self) -> dict:
        """How many calls the server answered, in how many batches."""
        with self._lock:
            return {"calls": self._calls, "batches": self._batches}


class Coordinator:
    """Waits until every client has reported, prints the server's batching, stops the program.

    A CourierNode with a `run()`: clients call `client_done` while `run()` waits.
    """

    def __init__(self, server, num_clients: int):
        self._server = server
        self._num_clients = num_clients
        self._reported: set[int] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()

    def client_done(self, client_id: int) -> None:
        with self._lock:
            self._reported.add(client_id)
            if len(self._reported) == self._num_clients:
                self._wake.set()

    def run(self) -> None:
        # If the program stops for another reason (a client failed), stop waiting too. The
        # handler only runs for a stop that starts after it is registered: hence the check.
        lp.register_stop_handler(self._wake.set)
        if not lp.stop_event().is_set():
            self._wake.wait()
        if lp.stop_event().is_set():
            return
        stats = self._server.stats()
        print(f"Server answered {stats['calls']} calls in {stats['batches']} batches: "
              f"average batch size {stats['calls'] / stats['batches']:.1f} "
              f"(batch_size={BATCH_SIZE})", flush=True)
        lp.stop()


def run_client(client_id: int, server, coordinator, num_calls: int) -> None:
    """A client node's code: all calls in flight at once, so the server can batch them."""
    observations = np.random.default_rng(client_id).integers(
        -5, 5, size=(num_calls, OBS_DIM)).astype(np.float64)
    futures = [server.futures.act(obs) for obs in observations]
    actions = np.stack([f.result() for f in futures])
    if not np.allclose(actions, observations @ policy_weights()):
        raise ValueError(f"client {client_id} got wrong actions from the server")
    # One write (end=""), so the lines of clients printing at once do not interleave.
    print(f"client {client_id}: made {num_calls} calls, every answer correct\n", end="",
          flush=True)
    coordinator.client_done(client_id)


def make_program(num_clients: int = 4, calls_per_client: int = 8) -> lp.Program:
    """Builds the program: `server`, `coordinator`, and a `client` group of N PyNodes."""
    program = lp.Program("batching")
    server = program.add_node(lp.CourierNode(Server), label="server")
    coordinator = program.add_node(lp.CourierNode(Coordinator, server, num_clients),
                                   label="coordinator")
    with program.group("client"):
        for i in range(num_clients):
            program.add_node(lp.PyNode(run_client, i, server, coordinator, calls_per_client))
    return program


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    controller = lp.launch(make_program(_NUM_CLIENTS.value, _CALLS_PER_CLIENT.value))
    controller.wait()
    print("Program stopped cleanly.", flush=True)


if __name__ == "__main__":
    app.run(main)
