"""A server for this host's clients alone (`Server(local_only=True)`, a node's server under a
local launch): it serves in this process and through its Unix socket, starts no gRPC server
and no TCP port, holds its port, and serves every transport where its clients would need
one (the environment asks for gRPC or TCP, or there is no socket directory)."""

from __future__ import annotations

import errno
import socket
import struct

import portpicker
import pytest

from launchpad import courier
from launchpad.courier._connection import channels
from launchpad.courier._sockets import unix_sockets
from tests.courier.conftest import TOKEN

pytestmark = pytest.mark.timeout(60)


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def test_it_serves_this_host_and_refuses_grpc_at_once(serve, connect, service, monkeypatch):
    monkeypatch.delenv(channels.ENV_TRANSPORT, raising=False)  # (a run may force gRPC)
    server = serve(service, token=TOKEN, local_only=True)
    assert connect(server, token=TOKEN).ping() == "pong"
    local = connect(server, token=TOKEN, transport="local")
    assert local.ping() == "pong" and courier.transport_of(local) == "local"
    assert _refused(server.port)  # the port is held, not listened on: no gRPC, no records
    with pytest.raises(OSError) as taken:
        socket.create_server(("127.0.0.1", server.port)).close()
    assert taken.value.errno == errno.EADDRINUSE
    with pytest.raises(courier.ServerUnavailableError):
        connect(server, token=TOKEN, transport="grpc", connect_timeout=1.0).ping()
    with pytest.raises(courier.ServerUnavailableError):
        connect(server, token=TOKEN, transport="tcp", connect_timeout=1.0).ping()
    server.stop()
    socket.create_server(("127.0.0.1", server.port)).close()  # let go at stop


@pytest.mark.parametrize("mode", ["grpc", "tcp"])
def test_it_serves_every_transport_when_the_environment_asks_for_another(
        serve, connect, service, monkeypatch, mode):
    monkeypatch.setenv(channels.ENV_TRANSPORT, mode)
    server = serve(service, token=TOKEN, local_only=True)
    client = connect(server, token=TOKEN)
    assert client.ping() == "pong" and courier.transport_of(client) == mode


def test_without_a_socket_directory_it_serves_every_transport(serve, connect, service,
                                                             monkeypatch, tmp_path):
    # A directory others may use is not used. (This process's own: the user's shared one,
    # made unusable, would send other test runs' calls to gRPC meanwhile.)
    directory = tmp_path / "sockets"
    directory.mkdir(mode=0o755)
    monkeypatch.setattr(unix_sockets, "DIRECTORY", str(directory))
    assert unix_sockets.socket_dir() is None
    server = serve(service, token=TOKEN, local_only=True)
    client = connect(server, token=TOKEN, transport="local")
    # Every transport after all: gRPC, which hands over to the TCP port it offers.
    assert client.ping() == "pong" and courier.transport_of(client) == "tcp"


def test_a_client_that_dialed_before_the_server_started_reaches_it(serve, connect, service,
                                                                   monkeypatch):
    monkeypatch.delenv(channels.ENV_TRANSPORT, raising=False)  # (a run may force gRPC)
    port = portpicker.pick_unused_port()
    with socket.create_server(("127.0.0.1", port)) as early:
        early.settimeout(30)
        client = connect(f"127.0.0.1:{port}", token=TOKEN, transport="local",
                         connect_timeout=30)
        answer = client.futures.ping()  # no socket yet: the client dials over gRPC ...
        dialed, _ = early.accept()  # ... here, where nothing answers it
        dialed.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        dialed.close()  # (reset: the port is left in no TIME_WAIT, free to hold)
    serve(service, token=TOKEN, port=port, local_only=True)
    assert answer.result(timeout=30) == "pong"
    assert courier.transport_of(client) == "local"
