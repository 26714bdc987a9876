"""Named addresses of nodes, and parsing of 'host:port' strings.

Every node registers its addresses with its program's controller. Its courier address is the
port its server bound; an `Address` from `node.allocate_address(name)` is for something else
the node serves (a web UI, a foreign server such as Reverb's): before the node's code runs, it
gets a free port of the node's host, registered under its name. `resolve()` returns it, in the
owning node at once, anywhere else in the program once registered (waiting, bounded). Unlike a
courier port, an allocated port is picked before the foreign server binds it: the one place a
pick-then-bind race remains, because a foreign server cannot report the port it bound.
"""

from __future__ import annotations

import socket

from launchpad import context


class Address:
    """A named address of the node it is attached to (`node.allocate_address(name)`)."""

    def __init__(self, name: str = ""):
        self.name = name
        self.label: str | None = None
        self.index = 0

    def attach(self, label: str, index: int) -> None:
        self.label = label
        self.index = index

    def resolve(self, timeout: float = 60.0) -> str:
        """Returns 'host:port' of this address in the running program."""
        if self.label is None:
            raise ValueError(f"Address {self.name!r} belongs to no node; create it with "
                             "node.allocate_address(name)")
        return context.current().controller.resolve(self.label, self.index, self.name, timeout)

    def __repr__(self) -> str:
        return f"Address({self.name!r} of {self.label}/{self.index})"


def get_port_from_address(address: str) -> int:
    """Returns the port of 'host:port', '[v6]:port' or 'scheme:host:port'.

    Raises:
      ValueError: the address has no numeric port.
    """
    if not isinstance(address, str) or ":" not in address:
        raise ValueError(f"Address {address!r} has no port (expected 'host:port')")
    port = address.rsplit(":", 1)[1]
    if not port.isdigit():
        raise ValueError(f"Address {address!r} has no numeric port")
    return int(port)


def routed_host(peer_host: str) -> str:
    """The address of this host's interface that traffic to `peer_host` leaves from: where a
    node on another host of the cluster reaches this one (no packet is sent)."""
    family = socket.AF_INET6 if ":" in peer_host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.connect((peer_host.strip("[]"), 9))
        return probe.getsockname()[0]
