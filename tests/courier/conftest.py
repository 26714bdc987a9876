"""Fixtures of the courier tests: real servers on real ports, stopped and closed after each test.

`serve(obj, **server_kwargs)` starts a `courier.Server` on a free port (port 0) and returns it;
`connect(target, **client_kwargs)` returns a `courier.Client` of a server (or of an address).
Every server and client a test makes through them is stopped or closed when the test ends, and
every `Blocker` handed out is released first, so no handler thread stays blocked.

A module that uses `courier_transport` (or `socket_transport`) runs each of its tests once per
transport: the clients of the test's own servers are narrowed to it (channels.py's
environment variable), and at the end every one of them that is still connected is checked
to have used that transport, so a client that silently took another one fails its test.
"""

from __future__ import annotations

import concurrent.futures
import threading

import pytest

from launchpad import courier
from launchpad.courier import errors
from launchpad.courier._connection import channels
from launchpad.courier._wire import streams

TOKEN = "test-secret-token"
# Each transport, and what the environment variable says to get it for a server of this
# process.
TRANSPORTS = {"in-process": "auto", "local": "local", "tcp": "tcp", "grpc": "grpc"}


def assert_reconnects(client) -> None:
    """A client whose server was replaced on the same port reaches the new one (its first
    call may still meet the old, broken stream; a third failure is a failure)."""
    for attempt in range(3):
        try:
            assert client.ping() == "pong"
            return
        except courier.ServerUnavailableError:
            if attempt == 2:
                raise


def assert_server_ends_stream(stream: streams.ClientStream,
                              message: bytes) -> errors.StreamBroken:
    """Sends `message` on a raw stream and asserts the server ends that stream within 5 s,
    rather than answering or hanging; returns how it ended."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        reply = pool.submit(stream.exchange, [message])
        done = concurrent.futures.wait([reply], timeout=5).done
        if not done:
            stream.cancel()
        assert done, "the server did not end the stream"
        with pytest.raises(errors.StreamBroken) as info:
            reply.result()
    stream.finish()
    return info.value


def open_raw_channel(server: courier.Server, kind: str) -> streams.Channel:
    """A channel of transport `kind` to `server`, connected (the caller closes it)."""
    mode = TRANSPORTS[kind]
    channel = channels.open_channel(server.address, mode=mode)
    assert channel.wait_until_ready(10)
    channel = channels.faster(channel, server.address, None, mode)  # (TCP: once it is up)
    assert channel.kind == kind
    return channel


@pytest.fixture(params=list(TRANSPORTS))
def courier_transport(request, monkeypatch) -> str:
    """Each transport in turn, for the clients of this test's own servers."""
    monkeypatch.setenv(channels.ENV_TRANSPORT, TRANSPORTS[request.param])
    return request.param


@pytest.fixture(params=["local", "grpc"])
def socket_transport(request, monkeypatch) -> str:
    """Each transport between processes in turn (those with a shared-memory lane)."""
    monkeypatch.setenv(channels.ENV_TRANSPORT, TRANSPORTS[request.param])
    return request.param


class Blocker:
    """A pair of events: `entered` is set when a method starts blocking, `release` ends it."""

    def __init__(self):
        self.entered = threading.Event()
        self.release = threading.Event()

    def block(self, timeout: float = 10.0) -> bool:
        self.entered.set()
        return self.release.wait(timeout)


class Service:
    """A small object to serve: the behaviours the client and server tests call."""

    def __init__(self):
        self.blocker = Blocker()
        self.calls = 0
        self._lock = threading.Lock()

    def add(self, a, b=0):
        return a + b

    def echo(self, *args, **kwargs):
        return args, kwargs

    def identity(self, value):
        return value

    def ping(self):
        with self._lock:
            self.calls += 1
        return "pong"

    def nothing(self):
        return None

    def block(self):
        """Blocks until the test releases it (or 10 s pass); returns whether it was released."""
        return self.blocker.block()

    def raise_key_error(self, key):
        return {}[key]

    def raise_value_error(self, message):
        raise ValueError(message)

    def unpicklable_result(self):
        return threading.Lock()

    def _private(self):
        return "secret"

    def __call__(self, x):
        return ("called", x)


@pytest.fixture
def serve():
    """Factory: starts a server for an object on a free port; stops it after the test."""
    servers: list[courier.Server] = []
    blockers: list[Blocker] = []

    def start(obj, **server_kwargs) -> courier.Server:
        server = courier.Server(obj, **server_kwargs)
        servers.append(server)
        if isinstance(obj, Service):
            blockers.append(obj.blocker)
        server.start()
        return server

    yield start
    for blocker in blockers:
        blocker.release.set()
    for server in servers:
        server.stop()


@pytest.fixture
def connect(request):
    """Factory: a client of a server (or of an address string); closed after the test."""
    clients: list[courier.Client] = []
    of_own_servers: list[courier.Client] = []

    def make(target, **client_kwargs) -> courier.Client:
        address = target.address if isinstance(target, courier.Server) else target
        client_kwargs.setdefault("connect_timeout", 5.0)
        client = courier.Client(address, **client_kwargs)
        clients.append(client)
        if isinstance(target, courier.Server) and "transport" not in client_kwargs:
            of_own_servers.append(client)
        return client

    yield make
    expected = (request.node.funcargs.get("courier_transport")
                or request.node.funcargs.get("socket_transport"))
    # (A server with TLS offers no TCP port: its clients of another host stay on gRPC.)
    used = {(courier.transport_of(client), client._tls is not None) for client in of_own_servers}
    for client in clients:
        courier.close(client)
    if expected is not None:
        over_tls = "grpc" if expected == "tcp" else expected
        wrong = {kind for kind, tls in used
                 if kind not in (None, over_tls if tls else expected)}
        assert not wrong, f"clients used {wrong}, not only {expected}"


@pytest.fixture
def service():
    """A fresh `Service`; its blocker is released at teardown even if no server served it."""
    obj = Service()
    yield obj
    obj.blocker.release.set()


@pytest.fixture
def server(serve, service):
    """A started server of `service` that requires `TOKEN`."""
    return serve(service, token=TOKEN)


@pytest.fixture
def client(connect, server):
    """A client of `server` with the right token."""
    return connect(server, token=TOKEN)
