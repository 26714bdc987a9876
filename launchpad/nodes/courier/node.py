"""`CourierNode`: an object whose public methods other nodes call through its handle.

How it runs: bind a courier server on a free port, register the address with the program's
controller, build the object (its handles become clients), then serve. If the object has a
`run()`, the node is done when it returns; otherwise it serves until the program stops.
Registering before building lets two nodes hold each other's handles (see `configure`).
Its handle dereferences to a `courier.Client` that finds the address through the controller.

An object with a `set_courier_server(server)` method is handed the server instead, as in
Launchpad: a `FunctionServer` with its public methods bound, answering once the object calls
`server.Start()`. Outside any launch (Launchpad's unit tests: the node's `courier_address`
bound with `Address.bind`, `node.run()` on a thread) the node serves on the bound port.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

from launchpad import context, courier
from launchpad.address import Address, get_port_from_address
from launchpad.courier import FunctionServer
from launchpad.nodes import base, handles, running
from launchpad.nodes.python import node as python

CourierClient = courier.Client  # what a CourierNode's handle becomes (Launchpad's name)

SERVER_OPTIONS = frozenset({"thread_pool_size", "port"})
CLIENT_OPTIONS = frozenset({"call_timeout", "wait_for_ready", "connect_timeout", "compress",
                            "transport"})
# Launchpad's client options that have nothing to do here, accepted and dropped: its C++
# chunking of tensors (large arrays travel as out-of-band buffers, or through shared memory
# on one host) and gRPC's load balancing between servers of one name.
_DROPPED_CLIENT_OPTIONS = frozenset({"chunk_tensors", "load_balancing_policy"})


def server_options(given: dict | None) -> dict:
    """Checked `courier_kwargs` (the node's server)."""
    return _checked("courier_kwargs", given, SERVER_OPTIONS)


def client_options(given: dict | None) -> dict:
    """Checked `courier_client_kwargs` (the clients a handle gives)."""
    options = _checked("courier_client_kwargs", given, CLIENT_OPTIONS | _DROPPED_CLIENT_OPTIONS)
    if options.get("transport") is not None:
        try:
            courier.transport_mode(options["transport"])
        except ValueError as e:
            raise ValueError(f"courier_client_kwargs: {e}") from None
    return {k: v for k, v in options.items() if k not in _DROPPED_CLIENT_OPTIONS}


def _checked(kind: str, given: dict | None, allowed: frozenset) -> dict:
    given = dict(given or {})
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise ValueError(f"Unknown {kind} option(s) {unknown}; allowed: {sorted(allowed)}")
    return given


class CourierHandle(handles.Handle):
    """Dereferences to a courier client of the node: through the program's controller, or,
    outside any launch, at `address` once it is bound (a CourierNode's own)."""

    def __init__(self, node: base.Node, client_kwargs: dict, address: Address | None = None):
        super().__init__(node)
        self._address = address
        self._kwargs = client_kwargs  # (Launchpad's name)

    def set_client_kwargs(self, **kwargs: Any) -> None:
        """Replaces the options of the clients this handle gives (Launchpad's)."""
        self._kwargs = client_options(kwargs)

    def dereference(self) -> courier.Client:
        if self._address is not None and self._address.bound:  # outside any launch
            return courier.Client(self._address.resolve(), token=context.process_token(),
                                  **self._kwargs)
        program = self._program_context()
        return program.client_of(self._label, self._index, **self._kwargs)


class CourierNode(python.PyClassNode):
    """Serves the public methods of `constructor(*args, **kwargs)` to other nodes.

    Args:
      constructor: the class (or factory) of the served object.
      courier_kwargs: server options: `thread_pool_size` (calls served at once), `port` (a
        fixed port; by default one the system picks).
      courier_client_kwargs: options of the clients its handle gives: `call_timeout`,
        `wait_for_ready`, `connect_timeout`, `compress`, `transport` (see courier.Client);
        Launchpad's `chunk_tensors` and `load_balancing_policy` are accepted and dropped.
    """

    def __init__(self, constructor: Callable[..., Any], *args,
                 courier_kwargs: dict | None = None,
                 courier_client_kwargs: dict | None = None, **kwargs):
        super().__init__(constructor, *args, **kwargs)
        self._courier_kwargs = server_options(courier_kwargs)
        self._courier_client_kwargs = client_options(courier_client_kwargs)
        self._address = Address(
            "", registered_by_node=base.registers_own_address(self, CourierNode))
        self.allocate_address(self._address)
        self._server: Any = None  # the node's server while it runs (Launchpad's name)

    @property
    def courier_address(self) -> Address:
        """The address of the node's courier server (Launchpad's name)."""
        return self._address

    def create_handle(self) -> handles.Handle:
        return CourierHandle(self, self._courier_client_kwargs, self._address)

    def run(self) -> None:
        # Handles that ask for gRPC or the TCP port need the server to offer them.
        remote = self._courier_client_kwargs.get("transport") in ("grpc", "tcp")
        with running.running_context() as node, serving(node, self._address, remote_clients=remote,
                                                     **self._courier_kwargs) as server:
            self._server = server
            try:
                instance = self._construct_instance()
                # Looked up on the type: an object that makes methods up on demand (a proxy,
                # lp.CacherNode's cache) does not mean to take the server.
                if callable(inspect.getattr_static(instance, "set_courier_server", None)):
                    instance.set_courier_server(serving_object(server, instance))
                elif instance is None:
                    server.serve(_NoMethods())
                else:  # (its calls wait for a save of its state, if it keeps one)
                    server.serve(instance if node.state is None
                                 else node.state.guarded(instance))
                run_or_wait(instance.run if self.runs_object(instance) else None, node)
            finally:
                self._instance = self._server = None

    def __getstate__(self) -> dict:
        return {**super().__getstate__(), "_server": None}


class _NoMethods:
    """What a CourierNode serves whose constructor returned nothing (a function run as the
    node, as Launchpad's examples do): its calls fail, naming no method."""


def serving_object(server: courier.Server, instance: Any) -> FunctionServer:
    """`server` as Launchpad's courier server, with `instance`'s public methods bound: it
    answers once its holder calls `Start()`."""
    handed = FunctionServer.serving_with(server)
    handed.bind_methods_of(instance, leave_out=("set_courier_server",))
    return handed


@contextlib.contextmanager
def serving(node: context.NodeContext, address: Address | None = None,
            **server_kwargs: Any) -> Iterator[Any]:
    """A started courier server of the running node, registered as its address before the
    node builds what it serves (so nodes may hold each other's handles); stopped on exit.
    Outside any launch it binds the port `address` is bound to, and registers nothing; so
    does it with an address registered already (a subclass's run() that called ours)."""
    registered = address is not None and (address.bound or not address.registered_by_node)
    if registered and "port" not in server_kwargs:
        server_kwargs["port"] = get_port_from_address(address.resolve())
    server = node.new_server(**server_kwargs)
    server.start()
    try:
        if not node.standalone and not registered:
            node.controller.register(node.label, node.index, "", node.endpoint(server.port))
        yield server
    finally:
        server.stop()


def run_or_wait(run: Callable[[], Any] | None, node: context.NodeContext) -> None:
    """The node is done when `run()` returns, or, with nothing to run, when it stops (its
    last state saved, if it keeps one). A save of its state that failed fails it."""
    state = node.state if node.state is not None and node.state.attached else None
    if run is not None:
        running.run_keeping_state(run)
    elif state is not None:
        state.wait()
    else:
        node.stop_event.wait()
