"""The gRPC server (grpc_server.py): its one method, a burst of new streams, and its threads.

New streams are taken from gRPC's core by a Python thread. Streams that arrive faster wait
in the core's backlog, and by default the core refuses a growing share of them (with
CANCELLED) past 1,000 waiting. Thousands of nodes registering at once did that. The courier
server lets as many wait as it can serve.

Here the server's process holds the GIL (a blocking read through ctypes.PyDLL, which does
not let it go) while a client opens more streams than the core's default backlog; once the
GIL is let go, every stream must be served.
"""

from __future__ import annotations

import os
import sys
import textwrap
import threading

import grpc
import pytest

from launchpad import courier
from launchpad.courier import errors
from launchpad.courier._grpc import grpc_client
from launchpad.courier._wire import serialization
from launchpad.courier._wire.serialization import Kind
from tests.courier.children import child_server
from tests.courier.conftest import TOKEN

pytestmark = pytest.mark.timeout(120)

# Past gRPC's default backlog of 1,000 by enough that, on the old limits, hundreds fail.
STREAMS = 2_200

# A server whose `hold(held, release)` says on FIFO `held` that it holds the GIL, and holds
# it until a byte comes on FIFO `release`.
GIL_HOLDER = textwrap.dedent("""
    import ctypes, os, sys
    from launchpad import courier

    read_holding_the_gil = ctypes.PyDLL(None).read

    class Holder:
        def identity(self, value):
            return value

        def hold(self, held, release):
            fd = os.open(release, os.O_RDWR)  # never blocks, and reads wait for a byte
            with open(held, "wb") as out:
                out.write(b"x")
            read_holding_the_gil(fd, ctypes.create_string_buffer(1), 1)
            os.close(fd)

    server = courier.Server(Holder(), token=sys.argv[1])
    server.start()
    print(server.port, flush=True)
    sys.stdin.read()
    server.stop()
""")


def _message(call_id: int, value: int) -> bytes:
    parts = serialization.dumps_call_arguments("identity", (value,), {})
    return serialization.join_message(
        [serialization.encode_frame(Kind.CALL, call_id, "identity", parts)])


def _value(reply: bytes) -> object:
    (frame,) = serialization.decode_message(reply)
    return frame.load()


def test_streams_opened_while_python_is_busy_are_all_served(tmp_path, monkeypatch):
    monkeypatch.setenv("LAUNCHPAD_COURIER_TRANSPORT", "grpc")
    held, release = tmp_path / "held", tmp_path / "release"
    os.mkfifo(held)
    os.mkfifo(release)
    with child_server([sys.executable, "-c", GIL_HOLDER, TOKEN]) as (_, port):
        address = f"127.0.0.1:{port}"
        holder = courier.Client(address, token=TOKEN)
        channel = grpc_client.GrpcChannel(address)
        opened: list[grpc_client.Stream] = []
        released = threading.Event()

        def let_go() -> None:  # even if the test fails: the server must not stay held
            if not released.is_set():
                released.set()
                with open(release, "wb") as out:
                    out.write(b"x")
        try:
            assert channel.wait_until_ready(10)
            hold = holder.futures.hold(str(held), str(release))
            with open(held, "rb") as said:
                assert said.read(1) == b"x"
            opened = [channel.open_stream(TOKEN) for _ in range(STREAMS)]
            let_go()
            hold.result(timeout=30)
            broken = []
            for i, stream in enumerate(opened):
                try:
                    assert _value(stream.exchange([_message(i, i)])) == i
                except errors.StreamBroken as e:
                    broken.append(e)
            assert not broken, (f"{len(broken)} of {STREAMS} new streams were refused, "
                                f"the first with {broken[0]}")
        finally:
            let_go()
            for stream in opened:
                stream.finish()
            channel.close()
            courier.close(holder)


def test_a_method_other_than_the_stream_is_not_found():
    with courier.Server(object()) as server, grpc.insecure_channel(server.address) as channel:
        with pytest.raises(grpc.RpcError) as info:
            channel.unary_unary("/launchpad.courier.Courier/Other")(b"", timeout=10)
    assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED


class _Echo:
    def identity(self, value):
        return value


def test_many_open_streams_are_served_by_few_threads():
    """Open streams wait on the server's one queue, not on a thread each (which, waking
    every 200 ms, made 1,250 idle streams cost a tenth of a core)."""
    with courier.Server(_Echo(), token=TOKEN) as server:
        channel = grpc_client.GrpcChannel(server.address)
        opened = []
        try:
            assert channel.wait_until_ready(10)
            before = threading.active_count()
            for i in range(300):
                opened.append(channel.open_stream(TOKEN))
                assert _value(opened[-1].exchange([_message(i, i)])) == i
            added = threading.active_count() - before
            assert added <= 5, f"{added} more threads for 300 idle streams"
        finally:
            for stream in opened:
                stream.finish()
            channel.close()
