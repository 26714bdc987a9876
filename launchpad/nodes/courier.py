"""`CourierNode`: an object whose public methods other nodes call through its handle.

How it runs: bind a courier server on a free port, register the address with the program's
controller, build the object (its handles become clients), then serve. If the object has a
`run()`, the node is done when it returns; otherwise it serves until the program stops.
Registering before building lets two nodes hold each other's handles (see `configure`).
Its handle dereferences to a `courier.Client` that finds the address through the controller.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from launchpad import context
from launchpad.courier import client as courier_client
from launchpad.courier import transport as courier_transport
from launchpad.nodes import base, python

SERVER_OPTIONS = frozenset({"thread_pool_size"})
CLIENT_OPTIONS = frozenset({"call_timeout", "wait_for_ready", "connect_timeout", "compress",
                            "transport"})


def check_options(kind: str, given: dict | None, allowed: frozenset) -> dict:
    given = dict(given or {})
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise ValueError(f"Unknown {kind} option(s) {unknown}; allowed: {sorted(allowed)}")
    return given


class CourierHandle(base.Handle):
    """Dereferences to a courier client of the node."""

    def __init__(self, node: "CourierNode", client_kwargs: dict):
        super().__init__(node)
        self._client_kwargs = client_kwargs

    def dereference(self) -> courier_client.Client:
        program = self._program_context()
        return program.client_of(self._label, self._index, **self._client_kwargs)


class CourierNode(python.PyClassNode):
    """Serves the public methods of `cls(*args, **kwargs)` to other nodes.

    Args:
      cls: the class (or factory) of the served object.
      courier_kwargs: server options: `thread_pool_size` (calls served at once).
      courier_client_kwargs: options of the clients its handle gives: `call_timeout`,
        `wait_for_ready`, `connect_timeout`, `compress`, `transport` (see courier.Client).
    """

    def __init__(self, cls: Callable[..., Any], *args,
                 courier_kwargs: dict | None = None,
                 courier_client_kwargs: dict | None = None, **kwargs):
        super().__init__(cls, *args, **kwargs)
        self._server_kwargs = check_options("courier_kwargs", courier_kwargs, SERVER_OPTIONS)
        self._client_kwargs = check_options(
            "courier_client_kwargs", courier_client_kwargs, CLIENT_OPTIONS)
        if self._client_kwargs.get("transport") is not None:
            try:
                courier_transport.mode_of(self._client_kwargs["transport"])
            except ValueError as e:
                raise ValueError(f"courier_client_kwargs: {e}") from None

    def create_handle(self) -> base.Handle:
        return CourierHandle(self, self._client_kwargs)

    def execute(self) -> None:
        node = context.current()
        with serving(node, **self._server_kwargs) as server:
            instance = self.build()
            server.serve(instance)
            run_or_wait(instance.run if self.runs_object(instance) else None, node)


@contextlib.contextmanager
def serving(node: context.NodeContext, **server_kwargs: Any) -> Iterator[Any]:
    """A started courier server of the running node, registered as its address before the
    node builds what it serves (so nodes may hold each other's handles); stopped on exit."""
    server = node.new_server(**server_kwargs)
    server.start()
    try:
        node.controller.register(node.label, node.index, "", node.endpoint(server.port))
        yield server
    finally:
        server.stop()


def run_or_wait(run: Callable[[], Any] | None, node: context.NodeContext) -> None:
    """The node is done when `run()` returns, or, with nothing to run, when it stops."""
    if run is not None:
        run()
    else:
        node.stop_event.wait()
