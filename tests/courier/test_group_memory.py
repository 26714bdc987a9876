"""A group call's large arguments cross to the members on this host through one shared-memory
region (lanes.share): copied in once whatever the number of members, copied out once by
each member, which keeps no mapping of it, and given back once every member has read it.
Members are real servers in child processes; bytes are counted by lanes.bytes_copied,
regions through /proc."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Iterator

import numpy as np
import pytest

from launchpad import courier
from launchpad.courier._shared_memory import lanes, memory_files
from tests.courier.children import ECHO_SERVER, child_server, memory_regions
from tests.courier.conftest import TOKEN

pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.usefixtures("socket_transport"),
    pytest.mark.skipif(not lanes.enabled(), reason="needs Linux memfd and /proc"),
]

ARRAY = np.arange(1 << 17, dtype=np.float64)  # 1 MiB


@contextlib.contextmanager
def _members(count: int, switched_off: int = 0) -> Iterator[list[tuple[int, str]]]:
    """`count` echo servers in child processes, the last `switched_off` of them with shared
    memory turned off; yields (pid, address) of each."""
    with contextlib.ExitStack() as stack:
        members = []
        for index in range(count):
            env = dict(os.environ)
            if index >= count - switched_off:
                env[lanes.ENV_SWITCH] = "0"
            pid, port = stack.enter_context(
                child_server([sys.executable, "-c", ECHO_SERVER, TOKEN], env=env))
            members.append((pid, f"127.0.0.1:{port}"))
        yield members


@pytest.fixture
def group_of(connect):
    """Factory: a GroupClient of the members, every lane agreed (a first call made)."""
    def make(members: list[tuple[int, str]]) -> courier.GroupClient:
        group = courier.GroupClient([connect(address, token=TOKEN) for _, address in members])
        assert group.call.ping() == ["pong"] * len(members)
        return group
    return make


def _written_by(action) -> int:
    before = lanes.bytes_copied()["written"]
    action()
    return lanes.bytes_copied()["written"] - before


def test_a_large_argument_is_copied_once_for_every_member(group_of):
    with _members(4) as members:
        group = group_of(members)
        results = []
        assert _written_by(lambda: results.extend(group.call.nbytes(ARRAY))) == ARRAY.nbytes
        assert results == [ARRAY.nbytes] * 4
        assert _written_by(lambda: group.broadcast.nbytes(ARRAY)) == ARRAY.nbytes
        assert np.array_equal(group.call.identity(ARRAY)[2], ARRAY)
        # Each member's own client copies it into its own region: once per member.
        assert _written_by(lambda: [group[i].futures.nbytes(ARRAY).result(30)
                                    for i in range(4)]) == 4 * ARRAY.nbytes


def test_members_keep_no_mapping_and_the_region_goes_once_every_member_read_it(group_of):
    memory_files.local_probe()
    with _members(3) as members:
        group = group_of(members)
        # Counted once earlier tests' regions are gone: one freed by the collector during
        # the test would look like this test's given back early.
        gc.collect()
        regions_before = memory_regions()
        assert group.call.nbytes(ARRAY) == [ARRAY.nbytes] * 3
        # Each member copied it out and unmapped it: it holds only its probe.
        assert [memory_regions(pid) for pid, _ in members] == [1, 1, 1]
        # Here, the region is held by the members' streams until their next message...
        assert memory_regions() == regions_before + 1
        assert group.call.ping() == ["pong"] * 3
        assert memory_regions() == regions_before  # ...after which it is given back


def test_a_member_without_shared_memory_gets_it_inline(group_of):
    with _members(3, switched_off=1) as members:
        group = group_of(members)
        assert _written_by(lambda: group.call.identity(ARRAY)) == ARRAY.nbytes
        assert all(np.array_equal(result, ARRAY) for result in group.call.identity(ARRAY))
