"""Launchpad's courier utilities (Launchpad's path): `batched_handler`, and
`make_courier_server`, a Launchpad courier server with an object's public methods bound."""

from __future__ import annotations

from typing import Any

from launchpad import context
from launchpad.courier import FunctionServer, batched_handler


def make_courier_server(instance: Any, *courier_args: Any,
                        **courier_kwargs: Any) -> FunctionServer:
    """A FunctionServer (Launchpad's `courier.Server(*courier_args, **courier_kwargs)`)
    serving `instance`'s public methods (and `__call__`), but `set_courier_server`; it
    answers once started. Its token and TLS are those of the node this code runs in (outside
    any program, this process's token)."""
    node = context.current_or_outside()
    courier_kwargs.setdefault("token", node.token)
    courier_kwargs.setdefault("tls", node.tls)
    courier_kwargs.setdefault("host", node.bind_host)
    server = FunctionServer(*courier_args, **courier_kwargs)
    server.bind_methods_of(instance, leave_out=("set_courier_server",))
    return server


__all__ = ["batched_handler", "make_courier_server"]
