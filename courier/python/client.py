"""Launchpad's `courier.Client`: launchpad's courier client with Launchpad's parameters, and
the token and TLS of the node it is made in."""

from __future__ import annotations

import datetime

from launchpad import context, courier


class Client(courier.Client):
    """A client of the courier server at `server_address` ('host:port').

    Args:
      server_address: the server's address.
      compress: compress messages on the wire.
      call_timeout: seconds (or a timedelta) a call may take; None waits as long as it takes.
      wait_for_ready: wait for a server that is not up yet (up to the connect timeout, 30 s);
        False fails at once.
      chunk_tensors: Launchpad's C++ chunking of tensors; accepted, nothing to do here (large
        arrays travel as out-of-band buffers, or through shared memory on one host).
      load_balancing_policy: gRPC's balancing between servers of one name; accepted, nothing
        to do here (an address names one server).
    """

    def __init__(self, server_address: str, compress: bool = False,
                 call_timeout: int | float | datetime.timedelta | None = None,
                 wait_for_ready: bool = True, chunk_tensors: bool = False, *,
                 load_balancing_policy: str | None = None):
        del chunk_tensors, load_balancing_policy  # see the docstring
        node = context.current_or_outside()
        super().__init__(str(server_address), token=node.token, tls=node.tls,
                         compress=compress, call_timeout=call_timeout or None,
                         wait_for_ready=wait_for_ready)


list_methods = courier.list_methods

__all__ = ["Client", "list_methods"]
