"""The TCP transport (tcp_sockets.py): a client of another host learns the server's TCP port
over gRPC and calls there; a port it cannot reach, a server with TLS and a compressing
client leave it on gRPC; a TCP stream never gets a shared-memory lane; a server killed on its
host fails the calls, named, at once.

The other host is a network namespace (tests/cluster/netns.py) with a server of its own
process; every other behaviour of the transport is the courier suite's, run on each
transport (conftest.py's `courier_transport`).
"""

from __future__ import annotations

import os
import signal
import sys
import textwrap

import numpy as np
import portpicker
import pytest

from launchpad import courier
from launchpad.courier._connection import channels
from launchpad.courier._sockets import socket_client, tcp_sockets
from launchpad.courier._wire import serialization
from launchpad.courier._wire.serialization import Kind
from tests.cluster.fixtures import namespaces_unavailable
from tests.cluster.netns import HostNetwork
from tests.courier.children import child_server
from tests.courier.conftest import TOKEN

pytestmark = pytest.mark.timeout(120)

# A server bound to the given host, in a process of its own (run inside a namespace).
_SERVER = textwrap.dedent("""
    import sys
    from launchpad import courier

    class Echo:
        def identity(self, value):
            return value

        def pid(self):
            import os
            return os.getpid()

    server = courier.Server(Echo(), token=sys.argv[1], host=sys.argv[2])
    server.start()
    print(server.port, flush=True)
    sys.stdin.read()
    server.stop()
""")


@pytest.fixture(scope="module")
def other_host():
    """One simulated host (a network namespace), reached at its address from here."""
    why = namespaces_unavailable()
    if why:
        pytest.skip(why)
    with HostNetwork(1) as network:
        yield network


def test_a_client_of_another_host_calls_over_its_tcp_port(other_host, connect):
    host = other_host.hosts[0]
    argv = other_host.exec_argv(host, [sys.executable, "-c", _SERVER, TOKEN, "0.0.0.0"])
    with child_server(argv, env={**os.environ, "PYTHONPATH": os.getcwd()}) as (pid, port):
        client = connect(f"{host.address}:{port}", token=TOKEN, transport="auto")
        array = np.arange(1 << 20, dtype=np.float32)  # 4 MiB, both ways
        np.testing.assert_array_equal(client.identity(array), array)
        assert courier.transport_of(client) == "tcp"
        futures = [client.futures.identity(i) for i in range(64)]
        assert [f.result(timeout=30) for f in futures] == list(range(64))
        assert client.pid() == pid

        os.kill(pid, signal.SIGKILL)  # the server, killed on its host
        with pytest.raises(courier.ServerUnavailableError, match=host.address):
            client.identity(1)


def test_a_port_that_cannot_be_reached_leaves_the_client_on_grpc(serve, connect, service):
    server = serve(service, token=TOKEN)
    # As if a firewall stood between: the port offered is one nobody listens on.
    server._endpoints._grpc.tcp_port = portpicker.pick_unused_port()
    client = connect(server.address, token=TOKEN, transport="tcp")
    assert client.add(1, 2) == 3
    assert courier.transport_of(client) == "grpc"


def test_a_tcp_stream_gets_no_shared_memory_lane(serve, service):
    server = serve(service, token=TOKEN)
    channel = channels.open_channel(server.address, mode="tcp")
    assert channel.wait_until_ready(10)
    port = channel.offered_tcp_port()
    channel.close()
    # A client that offers its memory files anyway, on the TCP port: no lane is accepted.
    stream = socket_client.SocketStream(tcp_sockets.connect("127.0.0.1", port, 5.0), TOKEN,
                                      offer_shared_memory=True)
    parts = serialization.dumps_call_arguments("add", (2, 3), {})
    message = serialization.join_message([serialization.encode_frame(Kind.CALL, 1, "add",
                                                                     parts)])
    try:
        assert stream.exchange([message])
        assert stream.messages.lane is None
    finally:
        stream.finish()


def test_a_server_with_tls_offers_no_tcp_port(serve, service):
    pytest.importorskip("cryptography")  # (TLS.generate)
    tls = courier.TLS.generate()
    server = serve(service, token=TOKEN, tls=tls)
    channel = channels.open_channel(server.address, tls=tls, mode="tcp")
    try:
        assert channel.wait_until_ready(10)
        assert channel.offered_tcp_port() is None
    finally:
        channel.close()
