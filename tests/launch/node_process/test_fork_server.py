"""What the fork server prepares before it forks, so that forks share its pages: everything a
node imports, and a heap with no free chunk left for a node's allocations to copy a page for.
Each check runs in an interpreter of its own, prepared as the fork server prepares itself."""

import json
import pathlib
import platform
import subprocess
import sys

import pytest

from tests.launch.helpers import TIMEOUT

ROOT = pathlib.Path(__file__).parents[3]

# In a fork of a prepared interpreter: what a CourierNode's process does with courier (a server
# started, a call to another one, its reply), then the modules that were imported for it.
_FORK_SERVES_AND_CALLS = """
import json, os, sys
from launchpad.launch.node_process import fork_server
fork_server._preload()
before = set(sys.modules)
read, write = os.pipe()
if os.fork() == 0:
    from launchpad import courier
    class Echo:
        def echo(self, value):
            return value
    with courier.Server(Echo(), token="t") as first, courier.Server(Echo(), token="t"):
        client = courier.Client(first.address, token="t")
        assert client.echo(b"x" * 100) == b"x" * 100
        courier.close(client)
    os.write(write, json.dumps(sorted(set(sys.modules) - before)).encode())
    os._exit(0)
os.close(write)
print(os.read(read, 1 << 20).decode())
os.wait()
"""

_HEAP_AFTER_TAKING = """
import ctypes
from launchpad.launch.node_process import fork_heap
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = fork_heap._MallInfo2
blocks = [bytes(n) for n in range(600, 2000)]
kept = blocks[::2]
del blocks  # every other one freed: holes in the heap, as imports leave
before = libc.mallinfo2()
taken = fork_heap.take_free_chunks()
after = libc.mallinfo2()
print(before.fordblks - before.keepcost, after.fordblks - after.keepcost, taken)
"""


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_fork_of_the_fork_server_serves_and_calls_without_importing_anything():
    assert json.loads(_run(_FORK_SERVES_AND_CALLS)) == []


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="only glibc's heap is handled")
def test_the_fork_server_takes_every_free_chunk_of_its_heap_before_it_forks():
    free_before, free_after, taken = (int(n) for n in _run(_HEAP_AFTER_TAKING).split())
    assert free_before > 100_000 and taken > 0
    assert free_after == 0
