"""The same-host shortcut: large parts through shared memory, between real servers and clients.

Regions are counted through /proc (children.memory_regions), which is how a test sees that
parts really went through shared memory, and that all are given back.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from launchpad import courier
from launchpad.courier import errors
from launchpad.courier._shared_memory import lanes, memory_files
from launchpad.courier._wire import serialization, streams
from launchpad.courier._wire.serialization import Kind
from tests.courier.children import child_server, memory_regions
from tests.courier.conftest import TOKEN, assert_server_ends_stream, open_raw_channel

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.usefixtures("socket_transport"),
    pytest.mark.skipif(not lanes.enabled(), reason="needs Linux memfd and /proc"),
]

LARGE = lanes.INLINE_LIMIT


def _array(nbytes: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random(nbytes // 8)


@pytest.fixture
def regions_before():
    """The number of regions this process holds before the test (its probe made first)."""
    memory_files.local_probe()
    return memory_regions()


# ----------------------------------------------------------------------------- writer and reader


def test_writer_places_parts_that_a_reader_copies_out_read_only():
    writer, reader = lanes.Writer(), lanes.Reader(os.getpid())
    array = _array(3 * LARGE)
    try:
        first, second = writer.place([b"x" * LARGE, memoryview(array).cast("B")])
        assert bytes(reader.take(memoryview(first))) == b"x" * LARGE
        copied = reader.take(memoryview(second))
        assert copied.readonly
        assert np.array_equal(np.frombuffer(copied, array.dtype), array)
    finally:
        writer.close()
        reader.close()


def test_reset_reuses_the_region_from_its_start():
    writer = lanes.Writer()
    try:
        before = writer.place([b"a" * LARGE])[0]
        writer.reset()
        after = writer.place([b"b" * LARGE])[0]
        assert before == after  # same region, same place
    finally:
        writer.close()


def test_a_region_outgrown_stays_readable_until_the_next_reset(regions_before):
    writer, reader = lanes.Writer(), lanes.Reader(os.getpid())
    try:
        small = writer.place([b"s" * LARGE])[0]
        large = writer.place([b"L" * (4 << 20)])[0]  # does not fit: a new, larger region
        assert memory_regions() == regions_before + 2
        assert bytes(reader.take(memoryview(small))) == b"s" * LARGE
        assert bytes(reader.take(memoryview(large))) == b"L" * (4 << 20)
        writer.reset()
        assert memory_regions() == regions_before + 1
        with pytest.raises(ValueError, match="gone|no longer"):
            reader.take(memoryview(small))
    finally:
        writer.close()
        reader.close()
    assert memory_regions() == regions_before


def test_a_region_much_larger_than_messages_need_is_given_back():
    writer = lanes.Writer()
    try:
        huge = writer.place([b"h" * (20 << 20)])[0]
        writer.reset()
        small = writer.place([b"s" * LARGE])[0]
        assert small[:12] == huge[:12]  # the large need is recent: the region is kept
        writer.reset()
        again = writer.place([b"s" * LARGE])[0]
        assert again[:12] != huge[:12]  # a new region (fd and nonce differ)
    finally:
        writer.close()


def test_a_reference_whose_descriptor_now_names_another_region_is_refused():
    # As after a writer closed a region and the fd number was reused: the nonce differs.
    first, second = lanes.Writer(), lanes.Writer()
    reader = lanes.Reader(os.getpid())
    try:
        reference = first.place([b"r" * LARGE])[0]
        other = second.place([b"o" * LARGE])[0]
        forged = other[:4] + reference[4:]  # the other region's fd, the first one's nonce
        with pytest.raises(ValueError, match="no longer the shared-memory region"):
            reader.take(memoryview(forged))
    finally:
        first.close()
        second.close()
        reader.close()


def test_a_reference_outside_its_region_is_refused():
    writer, reader = lanes.Writer(), lanes.Reader(os.getpid())
    try:
        reference = bytearray(writer.place([b"o" * LARGE])[0])
        reference[12:20] = (1 << 40).to_bytes(8, "little")  # the offset
        with pytest.raises(ValueError, match="outside its region"):
            reader.take(memoryview(bytes(reference)))
    finally:
        writer.close()
        reader.close()


def test_probes():
    assert memory_files.verify_probe(memory_files.local_probe()) == os.getpid()
    pid, fd, nonce = memory_files.local_probe().split(":")
    assert memory_files.verify_probe(f"{pid}:{fd}:{int(nonce) ^ 1}") is None
    assert memory_files.verify_probe(f"{pid}:999999:{nonce}") is None
    assert memory_files.verify_probe("not a probe") is None
    assert memory_files.verify_probe("") is None


@pytest.mark.parametrize("address, same", [
    ("127.0.0.1:80", True), ("127.3.2.1:80", True), ("localhost:1", True), ("[::1]:5", True),
    ("10.0.0.7:80", False), ("example.com:443", False), ("[2001:db8::1]:5", False),
])
def test_only_loopback_addresses_are_offered_shared_memory(address, same):
    assert lanes.is_same_host(address) is same


@pytest.mark.parametrize("value", ["0", "false", "No"])
def test_the_environment_switch_turns_it_off(monkeypatch, value):
    monkeypatch.setenv(lanes.ENV_SWITCH, value)
    assert not lanes.enabled()


# ----------------------------------------------------------------------------- through courier


class Arrays:
    """Served: returns what it gets, or makes large values from small calls."""

    def identity(self, value):
        return value

    def zeros(self, count):
        return np.zeros(count, np.float32)

    def sum(self, array):
        return float(array.sum())


def test_large_values_cross_both_ways_through_shared_memory(serve, connect, regions_before):
    client = connect(serve(Arrays(), token=TOKEN), token=TOKEN)
    array = _array(4 << 20)
    assert client.identity(b"warm-up") == b"warm-up"  # the lane is agreed on the first call
    result = client.identity(array)
    assert np.array_equal(result, array)
    assert not result.flags.writeable  # as inline arrays: read-only views
    assert client.identity(b"b" * (3 * LARGE)) == b"b" * (3 * LARGE)  # an in-band pickle
    # One region written by the client and one by the server.
    assert memory_regions() == regions_before + 2


def test_a_small_call_gets_a_large_reply_through_shared_memory(serve, connect, regions_before):
    client = connect(serve(Arrays(), token=TOKEN), token=TOKEN)
    client.zeros(1)
    assert client.zeros(1 << 20).nbytes == 4 << 20
    assert memory_regions() == regions_before + 1  # only the server wrote a region


def test_calls_in_flight_together_share_one_message_and_region(serve, connect):
    client = connect(serve(Arrays(), token=TOKEN), token=TOKEN)
    client.sum(np.ones(4))
    arrays = [_array(2 * LARGE, seed) for seed in range(16)]
    futures = [client.futures.identity(array) for array in arrays]
    for future, array in zip(futures, arrays, strict=True):
        assert np.array_equal(future.result(timeout=30), array)


def test_regions_are_given_back_when_client_and_server_stop(serve, connect, regions_before):
    server = serve(Arrays(), token=TOKEN)
    client = connect(server, token=TOKEN)
    for _ in range(3):
        client.identity(_array(2 << 20))
    with concurrent.futures.ThreadPoolExecutor(4) as pool:  # several streams, several lanes
        list(pool.map(client.sum, [_array(LARGE, seed) for seed in range(8)]))
    assert memory_regions() > regions_before
    courier.close(client)
    server.stop()
    assert memory_regions() == regions_before


def test_with_the_switch_off_large_values_travel_inline(serve, connect, monkeypatch,
                                                       regions_before):
    monkeypatch.setenv(lanes.ENV_SWITCH, "0")
    client = connect(serve(Arrays(), token=TOKEN), token=TOKEN)
    array = _array(2 << 20)
    for _ in range(2):
        assert np.array_equal(client.identity(array), array)
    assert memory_regions() == regions_before


def test_when_no_region_can_be_had_parts_travel_inline(serve, connect, monkeypatch,
                                                       regions_before):
    client = connect(serve(Arrays(), token=TOKEN), token=TOKEN)
    client.identity(None)

    def no_memory(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_memory)
    array = _array(2 << 20)
    assert np.array_equal(client.identity(array), array)
    assert memory_regions() == regions_before


def _stream_with_lane(channel) -> streams.ClientStream:
    """A raw stream that has agreed on a lane with its server."""
    stream = channel.open_stream(TOKEN, offer_shared_memory=True)
    frame = serialization.encode_frame(
        Kind.CALL, 1, "identity", serialization.dumps_call_arguments("identity", (1,), {}))
    stream.exchange([serialization.join_message([frame])])
    assert stream.messages.lane is not None
    return stream


def _large_call(lane: lanes.Lane) -> bytes:
    parts = serialization.dumps_call_arguments("identity", (_array(2 * LARGE),), {})
    frame = serialization.encode_frame(Kind.CALL, 2, "identity", parts)
    return serialization.join_message([frame], lane.writer)


def test_a_reference_to_a_region_that_is_gone_drops_only_its_stream(serve, connect,
                                                                     socket_transport):
    server = serve(Arrays(), token=TOKEN)
    channel = open_raw_channel(server, socket_transport)
    try:
        stream = _stream_with_lane(channel)
        message = _large_call(stream.messages.lane)
        stream.messages.lane.writer.close()  # the region goes before the server reads it
        assert_server_ends_stream(stream, message)
    finally:
        channel.close()
    assert connect(server, token=TOKEN).sum(np.ones(3)) == 3.0


def test_a_shared_part_on_a_stream_without_a_lane_drops_only_its_stream(serve, connect,
                                                                         socket_transport):
    server = serve(Arrays(), token=TOKEN)
    channel = open_raw_channel(server, socket_transport)
    own_lane = lanes.Lane(os.getpid())
    try:
        stream = channel.open_stream(TOKEN)  # offers nothing
        assert_server_ends_stream(stream, _large_call(own_lane))
    finally:
        own_lane.close()
        channel.close()
    assert connect(server, token=TOKEN).sum(np.ones(2)) == 2.0


# ----------------------------------------------------------------------------- another process

_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    from launchpad import courier

    class Arrays:
        def identity(self, value):
            return value

        def zeros(self, count):
            return np.zeros(count, np.float32)

    server = courier.Server(Arrays(), token=sys.argv[1])
    server.start()
    print(server.port, flush=True)
    sys.stdin.read()
    server.stop()
""")


@contextlib.contextmanager
def _child_server(env: dict[str, str] | None = None):
    """A courier server in another process; yields (pid, address)."""
    with child_server([sys.executable, "-c", _CHILD, TOKEN],
                      env={**os.environ, **(env or {})}) as (pid, port):
        yield pid, f"127.0.0.1:{port}"


def test_another_process_on_this_host_shares_memory_both_ways(connect, regions_before):
    with _child_server() as (pid, address):
        client = connect(address, token=TOKEN)
        client.identity(0)
        array = _array(8 << 20, seed=3)
        assert np.array_equal(client.identity(array), array)
        assert client.zeros(1 << 20).sum() == 0.0
        assert memory_regions() == regions_before + 2  # our requests' region, the child's replies'
        assert memory_regions(pid) == 3  # the child's probe, and the same two regions
        courier.close(client)


def test_a_process_with_the_switch_off_is_answered_inline(connect, regions_before):
    with _child_server({lanes.ENV_SWITCH: "0"}) as (pid, address):
        client = connect(address, token=TOKEN)
        array = _array(2 << 20, seed=4)
        for _ in range(2):
            assert np.array_equal(client.identity(array), array)
        assert memory_regions() == regions_before
        assert memory_regions(pid) == 0
        courier.close(client)


def test_an_unreachable_server_still_fails_with_its_address(connect):
    client = connect("127.0.0.1:1", token=TOKEN, connect_timeout=0.5)
    with pytest.raises(errors.ServerUnavailableError, match="127.0.0.1:1"):
        client.identity(_array(2 * LARGE))


@pytest.mark.timeout(10)
def test_a_probe_naming_a_pipe_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    held = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # no writer: a plain open would wait
    try:
        assert memory_files.verify_probe(f"{os.getpid()}:{held}:1") is None
    finally:
        os.close(held)


_SANDBOXED = textwrap.dedent("""
    import errno
    import os

    def forbidden(*args, **kwargs):
        raise PermissionError(errno.EPERM, "Operation not permitted")

    os.memfd_create = forbidden  # as under a seccomp profile that denies memfd_create

    import numpy as np
    from launchpad import courier
    from launchpad.courier._shared_memory import lanes

    class Arrays:
        def identity(self, value):
            return value

    assert not lanes.enabled()
    with courier.Server(Arrays()) as server:
        client = courier.Client(server.address)
        array = np.arange(1 << 20, dtype=np.float32)
        for _ in range(2):
            assert np.array_equal(client.identity(array), array)
        courier.close(client)
    print("ok")
""")


def test_a_process_that_cannot_make_memory_files_works_without_them():
    result = subprocess.run([sys.executable, "-c", _SANDBOXED], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
