"""Hostile peers of a server in another process: what could end that process or bloat it.

A server of this process would take the test run down with it, so these attacks go to a
child's: a record whose length lies (a length of 1 GiB with a hundred bytes behind it once
took a GiB of the server's memory, zeroed before a byte arrived), and a memory file
truncated under the server's mapping of it (reading past its end was a SIGBUS: the server's
process died). Both must leave the server as it was, answering.
"""

from __future__ import annotations

import os
import sys

import pytest

from launchpad import courier
from launchpad.courier import errors
from launchpad.courier._connection import channels
from launchpad.courier._shared_memory import lanes
from launchpad.courier._sockets import socket_wire, unix_sockets
from launchpad.courier._status import Status
from launchpad.courier._wire import serialization
from tests.courier.children import ECHO_SERVER, child_server
from tests.courier.conftest import TOKEN
from tests.fuzz import wire
from tests.fuzz.test_streams import converse, exchange_within

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(unix_sockets.socket_dir() is None, reason="no local socket")]

@pytest.fixture(scope="module")
def child():
    """(pid, address) of a courier server in a child process, for the module's tests."""
    with child_server([sys.executable, "-c", ECHO_SERVER, TOKEN]) as (pid, port):
        yield pid, f"127.0.0.1:{port}"


def _peak_memory(pid: int) -> int:
    """The most memory process `pid` has held at once (VmHWM), in bytes."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) << 10
    pytest.skip("no VmHWM in /proc")


def _assert_answers(address: str) -> None:
    client = courier.Client(address, token=TOKEN, transport="local", call_timeout=10.0)
    try:
        assert client.ping() == "pong"
    finally:
        courier.close(client)


def test_a_length_that_lies_costs_the_server_no_memory(child):
    pid, address = child
    before = _peak_memory(pid)
    path = unix_sockets.socket_path(unix_sockets.socket_dir(), "127.0.0.1",
                                     int(address.rsplit(":", 1)[1]), None)
    hello = wire.record(socket_wire.HELLO, socket_wire.hello(TOKEN, ""))
    answered = converse(path, hello + wire.record(socket_wire.MESSAGE, b"x" * 100, 1 << 30))
    assert [kind for kind, _ in answered] == [socket_wire.ANSWER, socket_wire.STATUS]
    assert _peak_memory(pid) - before < 256 << 20
    _assert_answers(address)


@pytest.mark.skipif(not lanes.enabled(), reason="needs Linux memfd and /proc")
def test_a_memory_file_truncated_under_the_servers_mapping_does_not_end_it(child):
    pid, address = child
    channel = channels.open_channel(address, mode="local")
    hostile = os.memfd_create("launchpad-fuzz-truncated", os.MFD_CLOEXEC)  # not sealed
    try:
        os.ftruncate(hostile, 2 << 20)
        nonce = int.from_bytes(os.urandom(8), "little")
        os.pwrite(hostile, wire.LENGTH.pack(nonce), 0)
        payload = wire.call_pickle((b"x" * 1000,))
        os.pwrite(hostile, payload, 1 << 20)  # past the page the file keeps
        reference = wire.REFERENCE.pack(hostile, nonce, 1 << 20, len(payload))
        message = wire.frame(wire.CALL, 2, b"identity", [reference],
                             lengths=[wire.SHARED | len(reference)])

        def on_a_stream_with_a_lane(stream=None):
            stream = stream or channel.open_stream(TOKEN, offer_shared_memory=True)
            reply = stream.exchange([wire.frame(wire.CALL, 1, b"ping", [wire.call_pickle(())])])
            assert serialization.decode_message(reply)[0].load() == "pong"
            assert stream.messages.lane is not None
            return stream

        stream = on_a_stream_with_a_lane()
        try:
            first = stream.exchange([message])
        except errors.StreamBroken as e:
            first = e
            stream.finish()
        os.ftruncate(hostile, 4096)
        # Read again through a mapping the server may have kept: on that same stream if it
        # answered, else on a new one.
        again = stream if not isinstance(first, errors.StreamBroken) else None
        second = exchange_within(on_a_stream_with_a_lane(again), message)
    finally:
        os.close(hostile)
        channel.close()
    _assert_answers(address)  # the server's process is alive
    for outcome in (first, second):
        assert isinstance(outcome, errors.StreamBroken), outcome
        assert outcome.code == Status.INVALID_ARGUMENT
        assert "not a memory file sealed against shrinking" in outcome.details

