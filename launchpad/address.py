"""Named addresses of nodes, and parsing of 'host:port' strings.

Every node registers its addresses with its program's controller once it has bound them; an
`Address` lets a node serve something of its own (a web UI, a foreign server) on a port and
lets other nodes find it. Inside the node that owns it, `resolve()` allocates and registers a
port; anywhere else in the program it returns the registered address, waiting (bounded) for it.
"""

from __future__ import annotations

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
        return context.current().addresses.address_of(self.label, self.index, self.name,
                                                      timeout)

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
