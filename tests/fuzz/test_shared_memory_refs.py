"""Shared-memory references on the wire that point where they should not.

A stream that has agreed a lane with its server (the local socket, or gRPC to loopback) may
send a part as a reference - fd, nonce, offset, length - into a region of its own, which the
server opens through /proc. Here references name the client's region rightly or wrongly, its
probe, a pipe, a socket, a closed descriptor, a regular file or a memory file that is not
sealed (each holding the region's nonce and the part where the reference says): the server
answers the one that names a real part, refuses every other (INVALID_ARGUMENT), and keeps
serving. A region must be sealed against shrinking, or its owner could truncate it under the
server's mapping (test_a_server_process.py shows what that did).
"""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from launchpad.courier import errors
from launchpad.courier._shared_memory import lanes, memory_files
from launchpad.courier._status import Status
from launchpad.courier._wire import serialization, streams
from launchpad.courier._wire.serialization import Kind
from tests.courier.conftest import TOKEN, open_raw_channel
from tests.fuzz import wire
from tests.fuzz.conftest import Echo, target
from tests.fuzz.test_streams import exchange_within

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not lanes.enabled(), reason="needs memfd and /proc")]

VALUE = b"in shared memory" * 64
PAYLOAD = wire.call_pickle((VALUE,))
UNSAFE = ("file", "unsealed")  # holding the nonce and the part, but not sealed regions


class Descriptors:
    """Files of this process a reference may name instead of its region."""

    def __init__(self, folder):
        self._pipe = os.pipe()
        self._sockets = socket.socketpair()
        self._file = open(folder / "a-regular-file", "w+b")
        self.fds = {"pipe": self._pipe[0], "socket": self._sockets[0].fileno(),
                    "file": self._file.fileno(),
                    "unsealed": os.memfd_create("launchpad-fuzz-unsealed", os.MFD_CLOEXEC)}
        probe_fd, probe_nonce = memory_files.local_probe().split(":")[1:]
        self.fds["probe"] = int(probe_fd)
        self.probe_nonce = int(probe_nonce)

    def imitate(self, nonce: int, offset: int, part: bytes) -> None:
        """Makes the file and the unsealed memory file look like a region holding `part`."""
        for kind in UNSAFE:
            os.ftruncate(self.fds[kind], 1 << 20)
            os.pwrite(self.fds[kind], wire.LENGTH.pack(nonce), 0)
            os.pwrite(self.fds[kind], part, offset)

    def close(self) -> None:
        for fd in (*self._pipe, self.fds["unsealed"]):
            os.close(fd)
        for sock in self._sockets:
            sock.close()
        self._file.close()


@pytest.fixture
def descriptors(tmp_path):
    found = Descriptors(tmp_path)
    yield found
    found.close()


@pytest.fixture(params=["local", "grpc"])
def laned(request, serve, good_caller):
    """(a raw channel of the transport, the good caller) of a server under attack."""
    server = serve(Echo(), token=TOKEN)
    channel = open_raw_channel(server, request.param)
    caller = good_caller(server, request.param)
    yield channel, caller
    channel.close()


def _stream_with_lane(channel) -> streams.ClientStream:
    stream = channel.open_stream(TOKEN, offer_shared_memory=True)
    reply = stream.exchange([wire.frame(wire.CALL, 1, b"ping", [wire.call_pickle(())])])
    assert serialization.decode_message(reply)[0].load() == "pong"
    assert stream.messages.lane is not None
    return stream


_names = st.sampled_from(["region", "probe", "pipe", "socket", "closed", *UNSAFE])
_fields = st.one_of(st.just(None), st.integers(0, wire.U64), st.integers(0, 1 << 21))


@given(named=_names, closed_fd=st.integers(1 << 31, (1 << 32) - 1),
       nonce=st.one_of(st.just(None), st.integers(0, wire.U64)), offset=_fields, size=_fields,
       cut=st.sampled_from([None, 0, 31, 33]), kind=st.sampled_from([wire.CALL,
                                                                    wire.CALL | 0x80]))
@example(named="unsealed", closed_fd=1 << 31, nonce=None, offset=None, size=None, cut=None,
         kind=wire.CALL)
@example(named="file", closed_fd=1 << 31, nonce=None, offset=None, size=None, cut=None,
         kind=wire.CALL)
@target(40)
def test_a_reference_is_answered_only_where_it_names_a_real_part(
        laned, descriptors, named, closed_fd, nonce, offset, size, cut, kind):
    channel, caller = laned
    stream = _stream_with_lane(channel)
    [reference] = stream.messages.lane.writer.place([PAYLOAD])
    region_fd, region_nonce, part_offset, part_size = wire.REFERENCE.unpack(reference)
    descriptors.imitate(region_nonce, part_offset, PAYLOAD)
    fd = {"region": region_fd, "closed": closed_fd}.get(named) or descriptors.fds.get(named)
    if nonce is None:  # the right one
        nonce = descriptors.probe_nonce if named == "probe" else region_nonce
    rightly = (nonce == region_nonce and offset in (None, part_offset)
               and size in (None, part_size) and cut is None)
    reference = wire.REFERENCE.pack(fd, nonce, part_offset if offset is None else offset,
                                    part_size if size is None else size)
    if cut is not None:
        reference = (reference + b"\0")[:cut] if cut < 32 else reference + b"\0"
    message = wire.frame(kind, 2, b"identity", [reference],
                         lengths=[wire.SHARED | len(reference)])
    outcome = exchange_within(stream, message)
    if named == "region" and rightly:
        [result] = serialization.decode_message(outcome)
        assert result.kind == Kind.RESULT and result.load() == VALUE
    elif named not in ("region", "probe"):  # (in those, a part of other bytes is answered)
        assert isinstance(outcome, errors.StreamBroken), (named, outcome)
    if isinstance(outcome, errors.StreamBroken):
        assert outcome.code == Status.INVALID_ARGUMENT, outcome
    assert not caller.failures


def test_a_reference_to_a_pipe_is_refused_without_opening_it(tmp_path):
    """Opening what a reference names, to look at it, was itself an act: opening a FIFO for
    reading lets its writer in, opening a device may do anything. It is looked at first."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    held = os.open(fifo, os.O_PATH)  # names it, without opening it: no reader yet
    writer_in = threading.Event()

    def write() -> None:
        os.close(os.open(fifo, os.O_WRONLY))  # blocks until someone opens it for reading
        writer_in.set()

    writer = threading.Thread(target=write, name="fifo-writer", daemon=True)
    writer.start()
    try:
        _wait_until_waiting_for_a_reader(writer)
        assert memory_files.verify_probe(f"{os.getpid()}:{held}:1") is None
        with pytest.raises(ValueError, match="is gone"):
            lanes.Reader(os.getpid()).take(memoryview(
                wire.REFERENCE.pack(held, 1, 64, 1)))
        assert not writer_in.wait(0.5), "the reference's FIFO was opened"
    finally:
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # lets the writer go
        writer.join(10)
        os.close(reader)
        os.close(held)


def _wait_until_waiting_for_a_reader(writer: threading.Thread) -> None:
    """Returns once `writer` waits in its open of a FIFO (its kernel wait channel)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(f"/proc/self/task/{writer.native_id}/wchan") as wchan:
            if wchan.read() == "wait_for_partner":
                return
        time.sleep(0.01)  # polls: the kernel says when the thread blocks, to no one
    pytest.skip("this kernel does not tell where a thread waits (wchan)")
