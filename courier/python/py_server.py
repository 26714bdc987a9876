"""Launchpad's `courier.Server`: functions bound by name, started by hand
(launchpad/courier/function_server.py), with the token, TLS and interface of the node it is
made in."""

from __future__ import annotations

from launchpad import context
from launchpad.courier import FunctionServer


class Server(FunctionServer):
    """A courier server of functions bound by name (`Bind`), answering once `Start()`ed.

    Args:
      name: Launchpad's server name; kept, not used to find the server (`address` does).
      port: the port to bind (None: a free one the system picks).
      thread_pool_size: how many calls run at once.
    """

    def __init__(self, name: str | None = None, port: int | None = None,
                 thread_pool_size: int = 16):
        node = context.current_or_outside()
        super().__init__(name, port, thread_pool_size, token=node.token, host=node.bind_host,
                         tls=node.tls)


__all__ = ["Server"]
