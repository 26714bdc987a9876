"""Helpers of the launch tests that work across processes."""

from __future__ import annotations

import queue
import sys

from launchpad import courier

TIMEOUT = 20
# Where a Box listens: loopback, or, for programs on a test cluster's hosts (network
# namespaces), the cluster's gateway address (set by the slurm launch fixture).
BOX_HOST = "127.0.0.1"


class _Sink:
    def __init__(self, values: queue.Queue):
        self._values = values

    def put(self, value):
        self._values.put(value)


class BoxClient:
    """What a node holds of a Box: `put` sends the value to the test's process."""

    def __init__(self, address: str):
        self._address = address
        self._client = None

    def __getstate__(self):
        return {"_address": self._address, "_client": None}

    def put(self, value) -> None:
        if self._client is None:
            self._client = courier.Client(self._address, call_timeout=TIMEOUT)
        self._client.put(value)


class Box:
    """Collects values that nodes put, from threads or processes: a courier server in the
    test's process. Nodes get a BoxClient when the box is pickled with them."""

    def __init__(self):
        self._values: queue.Queue = queue.Queue()
        self._server = courier.Server(_Sink(self._values), host=BOX_HOST)
        self._address = self._server.start()

    @property
    def address(self) -> str:
        """Where nodes put values (what a BoxClient needs)."""
        return self._address

    def __reduce__(self):
        return BoxClient, (self._address,)

    def put(self, value) -> None:
        self._values.put(value)

    def get(self, timeout: float = TIMEOUT):
        try:
            return self._values.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no value arrived within {timeout}s") from None

    def empty(self) -> bool:
        return self._values.empty()

    def close(self) -> None:
        self._server.stop(grace=1)


def report_heavy_imports(held, box) -> None:
    """A node's code: puts whether Reverb and TensorFlow are imported in its process, its
    private memory in MB, and what it holds (defined here, in a module that imports neither)."""
    box.put(("reverb" in sys.modules, "tensorflow" in sys.modules, private_mb(), repr(held)))


def private_mb() -> float:
    """This process's private memory (pages no other process shares), in MB."""
    with open("/proc/self/smaps_rollup") as rollup:
        kb = sum(int(line.split()[1]) for line in rollup if line.startswith("Private_"))
    return kb / 1024
