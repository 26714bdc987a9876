"""A client's namespace is its server's: a served method named like one of ours - `close`,
`call`, `submit`, `transport`, ... - is called remotely, blocking and as a future, on every
transport (Launchpad's client forwards every name but `futures` and its `address`). Our own
operations are courier's functions; private, special and keyword names get a clear error."""

from __future__ import annotations

import pytest

from launchpad import courier

pytestmark = [pytest.mark.timeout(30), pytest.mark.usefixtures("courier_transport")]

# Every public name our client had of its own before it forwarded them all.
RESERVED_LOOKING = ["close", "call", "submit", "submit_parts", "start_parts", "transport",
                    "list_methods", "transport_of"]


class Queue:
    """A served object whose methods are named like a client's (as affordances_option_models'
    task queue serves `close`)."""

    def __init__(self):
        self.calls: list[tuple[str, tuple]] = []
        for name in RESERVED_LOOKING:
            setattr(self, name, self._recorder(name))

    def _recorder(self, name):
        def method(*args):
            self.calls.append((name, args))
            return f"remote {name}{args}"
        return method

    def ping(self):
        return "pong"


@pytest.fixture
def queue():
    return Queue()


@pytest.fixture
def client(serve, connect, queue):
    return connect(serve(queue))


@pytest.mark.parametrize("name", RESERVED_LOOKING)
def test_a_served_method_named_like_ours_is_called_remotely(client, queue, name):
    assert getattr(client, name)(1, 2) == f"remote {name}(1, 2)"
    assert getattr(client.futures, name)(3).result(10) == f"remote {name}(3,)"
    assert queue.calls == [(name, (1, 2)), (name, (3,))]
    assert client.ping() == "pong"  # the client itself is as it was: still open


def test_a_remote_close_leaves_the_client_open_and_courier_close_closes_it(client, queue):
    assert client.close() == "remote close()"
    assert client.ping() == "pong"
    courier.close(client)
    with pytest.raises(courier.ClientClosedError):
        client.ping()
    assert queue.calls == [("close", ())]


def test_our_operations_are_functions_of_courier(client, courier_transport):
    assert courier.transport_of(client) is None  # not connected yet
    assert courier.call(client, "ping") == "pong"
    assert courier.submit(client, "call", 7).result(10) == "remote call(7,)"
    assert courier.transport_of(client) == courier_transport
    assert sorted(courier.list_methods(client)) == sorted(RESERVED_LOOKING + ["ping"])


def test_futures_and_address_stay_the_clients_own_as_in_launchpad(serve, connect, queue):
    server = serve(queue)
    client = connect(server)
    assert client.address == server.address
    assert client.futures.ping().result(10) == "pong"


def test_a_private_or_special_name_is_refused_naming_why(client):
    with pytest.raises(AttributeError, match="'_hidden'.*public methods only"):
        client._hidden()
    with pytest.raises(AttributeError, match="'__length_hint__'.*public methods only"):
        client.__length_hint__()
    with pytest.raises(AttributeError, match="public methods only"):
        client.futures._hidden()
    assert not hasattr(client, "__array__")  # Python's own probes find nothing


def test_a_keyword_name_is_refused_as_an_attribute_and_reachable_by_courier_call(
        serve, connect):
    served = Queue()
    setattr(served, "class", lambda: "remote class")  # (a name only setattr can give)
    client = connect(serve(served))
    with pytest.raises(AttributeError, match=r"'class' is a Python keyword.*courier\.call"):
        getattr(client, "class")
    with pytest.raises(AttributeError, match="'lambda' is a Python keyword"):
        getattr(client.futures, "lambda")
    assert courier.call(client, "class") == "remote class"
