"""Idle connections that never send a byte cannot keep real clients away from a server.

The server runs in a child process whose open-files limit (hard limit too, so that raising
the soft one cannot hide the flood) is far below the number of idle connections the test
opens, to its gRPC port, its TCP port or its local socket. A client in a new process, on that
transport, must still get an answer within seconds.
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from launchpad.courier._connection import channels
from launchpad.courier._grpc import grpc_client, limits
from launchpad.courier._sockets import unix_sockets
from tests.courier.children import child_server

pytestmark = pytest.mark.timeout(90)

TOKEN = "flood-test-token"
LIMIT = 128  # the server's open files, soft and hard
FLOOD = 3 * LIMIT
# Generous for the handshake deadline (5 s), the client's reconnection backoff (2 s at most)
# and a loaded machine; gRPC's default deadline kept the client out for 120 s per batch.
CALL_WITHIN_SECS = 15.0

_SERVER = textwrap.dedent("""
    import resource
    import sys

    limit = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    from launchpad import courier

    class Service:
        def ping(self):
            return "pong"

    server = courier.Server(Service(), token=sys.argv[2])
    server.start()
    print(server.port, flush=True)
    sys.stdin.read()
    server.stop()
""")

_CALLER = textwrap.dedent("""
    import sys
    import time
    from launchpad import courier

    deadline = time.monotonic() + float(sys.argv[3])
    client = courier.Client(sys.argv[1], token=sys.argv[2], connect_timeout=1.0)
    try:
        while True:
            try:
                print(client.ping(), courier.transport_of(client), flush=True)
                break
            except courier.CourierError:
                if time.monotonic() > deadline:
                    raise
    finally:
        courier.close(client)
""")


@contextlib.contextmanager
def _limited_server(log_path):
    """A courier server in a child process limited to LIMIT open files; yields (pid, port)."""
    with open(log_path, "wb") as log, child_server(
            [sys.executable, "-c", _SERVER, str(LIMIT), TOKEN], stderr=log) as found:
        yield found


def _sockets_held(pid: int) -> int:
    count = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:")
    return count


def _tcp_port(port: int) -> int:
    """The TCP port for its records that the server of gRPC port `port` offers."""
    channel = grpc_client.GrpcChannel(f"127.0.0.1:{port}")
    try:
        assert channel.wait_until_ready(10)
        offered = channel.offered_tcp_port()
    finally:
        channel.close()
    assert offered is not None
    return offered


def _idle_connection(kind: str, port: int) -> socket.socket:
    """A connection that never sends a byte, to the server's gRPC port, its TCP port (`port`
    is then that one) or its local socket."""
    if kind in ("grpc", "tcp"):
        sock, where = socket.socket(), ("127.0.0.1", port)
    else:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        where = unix_sockets.socket_path(unix_sockets.socket_dir(), "127.0.0.1", port,
                                          None)
    sock.setblocking(False)
    with contextlib.suppress(BlockingIOError):
        sock.connect(where)
    return sock


@pytest.mark.parametrize("kind", ["grpc", "tcp", "local"])
def test_a_real_client_gets_through_a_flood_of_idle_connections(tmp_path, kind):
    with _limited_server(tmp_path / "server.log") as (pid, port):
        flooded = _tcp_port(port) if kind == "tcp" else port
        flood: list[socket.socket] = []
        try:
            for _ in range(FLOOD):
                flood.append(_idle_connection(kind, flooded))
            deadline = time.monotonic() + 10
            while _sockets_held(pid) < LIMIT // 2 and time.monotonic() < deadline:
                time.sleep(0.05)  # polls: the server accepts them, with no event to wait on
            assert _sockets_held(pid) >= LIMIT // 2, "the flood did not reach the server"

            started = time.monotonic()
            caller = subprocess.run(
                [sys.executable, "-c", _CALLER, f"127.0.0.1:{port}", TOKEN,
                 str(CALL_WITHIN_SECS)],
                capture_output=True, text=True, timeout=CALL_WITHIN_SECS + 30,
                env={**os.environ, channels.ENV_TRANSPORT: kind})
            took = time.monotonic() - started
        finally:
            for sock in flood:
                sock.close()
    assert caller.returncode == 0 and caller.stdout.split() == ["pong", kind], (
        f"no call got through within {CALL_WITHIN_SECS} s of the flood: {caller.stderr[-2000:]}")
    assert took < CALL_WITHIN_SECS + 10  # the caller's own start-up included


# ----------------------------------------------------------------------------- the limits

_RAISE = textwrap.dedent("""
    import resource
    import sys

    resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), int(sys.argv[2])))
    from launchpad.courier._grpc import limits

    print(limits.raise_open_files_limit(), limits.incoming_connections_cap(),
          *resource.getrlimit(resource.RLIMIT_NOFILE))
""")


def _raised(soft: int, hard: int) -> list[int]:
    """In a fresh process with these limits: the raised limit, the cap, the limits after."""
    result = subprocess.run([sys.executable, "-c", _RAISE, str(soft), str(hard)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return [int(field) for field in result.stdout.split()]


def test_the_soft_open_files_limit_is_raised_to_the_hard_one():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    hard = min(hard, 4096) if hard != resource.RLIM_INFINITY else 4096
    assert _raised(100, hard) == [hard, hard * 3 // 4, hard, hard]


def test_a_limit_that_cannot_be_raised_stays_and_sets_the_cap():
    assert _raised(200, 200) == [200, 150, 200, 200]


def test_the_cap_leaves_a_quarter_of_the_limit_to_the_rest_of_the_process():
    assert limits.incoming_connections_cap() == resource.getrlimit(
        resource.RLIMIT_NOFILE)[0] * 3 // 4
