"""Memory that one large call takes is given back while the connection stays open.

Between processes of one host a large part travels through shared-memory regions (see
lanes.py); a region larger than `lanes.KEEP_WARM` must not stay resident in
either process for as long as the connection lives. The collector is off in both processes
here, so only reference counting and the courier's own releases free anything.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import time

import numpy as np
import pytest

from launchpad import courier
from launchpad.courier._shared_memory import lanes
from tests.courier.children import ECHO_SERVER, child_server

pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.skipif(not lanes.enabled(), reason="needs Linux memfd and /proc"),
]

TOKEN = "memory-return-token"
MiB = 1 << 20
LARGE = 200 * MiB
# What a process may keep after the call: glibc's heap padding (allocator.py, 16 MiB) and
# what a small region kept warm holds.
SLACK = 32 * MiB

# The echo server, its collector off: what it frees, it frees as the call lets go of it.
_CHILD = "import gc\ngc.disable()\n" + ECHO_SERVER


def _rss(pid: int | str) -> int:
    """Resident memory of process `pid`, in bytes (VmRSS: anonymous, file and shared)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


@contextlib.contextmanager
def _child_server():
    """A courier server in another process; yields (pid, address); ends it afterwards."""
    with child_server([sys.executable, "-c", _CHILD, TOKEN]) as (pid, port):
        yield pid, f"127.0.0.1:{port}"


@pytest.fixture
def collector_off():
    collecting = gc.isenabled()
    gc.disable()
    yield
    if collecting:
        gc.enable()


def test_a_large_echo_leaves_neither_process_holding_its_size(collector_off):
    with _child_server() as (pid, address):
        client = courier.Client(address, token=TOKEN, connect_timeout=10)
        try:
            warm = np.ones(MiB // 8)
            assert np.array_equal(client.identity(warm), warm)  # lane agreed, regions made
            baseline = {"client": _rss("self"), "server": _rss(pid)}
            array = np.random.default_rng(0).random(LARGE // 8)
            assert np.array_equal(client.identity(array), array)
            del array

            echoed = time.monotonic()
            deadline = echoed + lanes.IDLE_SECS + 15
            while True:  # polls: memory is given back by a timer, with no event to wait on
                now = {"client": _rss("self"), "server": _rss(pid)}
                if all(now[side] <= baseline[side] + SLACK for side in now):
                    break
                if time.monotonic() > deadline:
                    pytest.fail(f"resident MiB {time.monotonic() - echoed:.0f} s after the "
                                f"echo: {_mib(now)}, before it: {_mib(baseline)}")
                time.sleep(0.1)
            # The same connection still works, and small calls still go through shared memory.
            assert np.array_equal(client.identity(warm), warm)
        finally:
            courier.close(client)


def _mib(sizes: dict[str, int]) -> dict[str, int]:
    return {side: size // MiB for side, size in sizes.items()}


# ----------------------------------------------------------------------------- writer and reader


def _mapped_regions() -> int:
    """How many courier regions this process has mapped (its own and its peers')."""
    with open("/proc/self/maps") as maps:
        return sum("memfd:launchpad-courier" in line for line in maps)


def test_a_reader_keeps_a_small_region_mapped_and_unmaps_a_large_one_once_read():
    small_writer, large_writer = lanes.Writer(), lanes.Writer()
    reader = lanes.Reader(os.getpid())
    try:
        small = small_writer.place([b"s" * (2 * lanes.INLINE_LIMIT)])[0]
        large = large_writer.place([b"L" * (lanes.KEEP_WARM + MiB)])[0]
        before = _mapped_regions()
        reader.take(memoryview(small))
        assert _mapped_regions() == before + 1  # kept for the next message
        assert bytes(reader.take(memoryview(large))) == b"L" * (lanes.KEEP_WARM + MiB)
        # Opening the large region let the small one go, and the large one went once read.
        assert _mapped_regions() == before
    finally:
        small_writer.close()
        large_writer.close()
        reader.close()


def test_a_writer_keeps_a_small_region_however_long_it_is_idle():
    writer = lanes.Writer()
    try:
        first = writer.place([b"s" * lanes.INLINE_LIMIT])[0]
        assert writer.release_if_idle(time.monotonic() + 1e6) is None
        writer.reset()
        assert writer.place([b"t" * lanes.INLINE_LIMIT])[0] == first  # same region
    finally:
        writer.close()


def test_a_writer_closes_a_large_region_only_once_it_sat_idle():
    writer = lanes.Writer()
    try:
        before = _mapped_regions()
        large = writer.place([b"L" * (lanes.KEEP_WARM + MiB)])[0]
        placed = time.monotonic()
        due = writer.release_if_idle(placed)
        assert due is not None
        assert placed + lanes.IDLE_SECS - 1 < due <= placed + lanes.IDLE_SECS
        assert _mapped_regions() == before + 1  # in use: kept
        writer.reset()
        assert writer.place([b"M" * (lanes.KEEP_WARM + MiB)])[0] == large  # reused
        assert writer.release_if_idle(time.monotonic() + lanes.IDLE_SECS + 1) is None
        assert _mapped_regions() == before  # closed
        writer.reset()
        assert writer.place([b"s" * lanes.INLINE_LIMIT])[0][:12] != large[:12]
    finally:
        writer.close()


def test_an_idle_large_region_is_closed_without_any_call(monkeypatch):
    monkeypatch.setattr(lanes, "IDLE_SECS", 0.2)
    writer = lanes.Writer()
    try:
        before = _mapped_regions()
        writer.place([b"L" * (lanes.KEEP_WARM + MiB)])
        assert _mapped_regions() == before + 1
        deadline = time.monotonic() + 10
        while _mapped_regions() > before and time.monotonic() < deadline:
            time.sleep(0.05)  # polls: the releaser's thread closes it, with no event to wait on
        assert _mapped_regions() == before
    finally:
        writer.close()
