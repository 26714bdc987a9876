"""Named addresses of nodes, and parsing of 'host:port' strings.

Every node registers its addresses with its program's controller. Its courier address is the
port its server bound; an `Address` a node allocates (`node.allocate_address(name)`, or
Launchpad's `address = lp.Address(); node.allocate_address(address)`) is for something else
the node serves (a web UI, a foreign server such as Reverb's): before the node's code runs,
it gets a free port of the node's host, registered under its name. `resolve()` returns it:
in the owning node at once, anywhere else in the program once registered (waiting,
bounded). The Address object itself travels: passed to other nodes, it resolves there too.
Unlike a courier port, an allocated port is picked before the foreign server binds it: the
one place a pick-then-bind race remains, because a foreign server cannot report the port it
bound.

Outside any launch (Launchpad's unit tests), an address bound to an address builder
(`address.bind(builder)`) resolves to what the builder builds: `SimpleLocalAddressBuilder`
picks a free port of this host.
"""

from __future__ import annotations

import abc
import os
import socket
import typing
from typing import Any

import portpicker

from launchpad import context


class AbstractAddressBuilder(abc.ABC):
    """Makes the 'host:port' an Address stands for, outside a launch (`Address.bind`)."""

    @abc.abstractmethod
    def build(self) -> str:
        """Returns the address."""


@typing.runtime_checkable
class AddressBuilder(typing.Protocol):
    """What `Address.bind` takes: an AbstractAddressBuilder, or any object with `build()`
    (as Launchpad took)."""

    def build(self) -> str:
        """Returns the address."""


class SimpleLocalAddressBuilder(AbstractAddressBuilder):
    """'localhost:PORT' with a free port of this host, picked once."""

    def __init__(self):
        self._address = f"localhost:{portpicker.pick_unused_port()}"

    def build(self) -> str:
        return self._address


class Address:
    """A named address of the node it belongs to (see the module doc).

    Args:
      name: the address's name among its node's (None: one is given when it is allocated).
      registered_by_node: the node registers it itself, once its server is up (a
        CourierNode's courier address, a ReverbNode's), so it gets no port before the node
        runs.
    """

    def __init__(self, name: str | None = None, *, registered_by_node: bool = False):
        if name is not None and not isinstance(name, str):
            raise TypeError(f"An address's name must be a string, got {name!r}")
        self.name = name
        self.label: str | None = None  # its node's place in the program, once added
        self.index = 0
        self.registered_by_node = registered_by_node
        self._address_builder: AbstractAddressBuilder | None = None
        self._owning_node: Any = None  # not pickled: only for checks before the launch

    def assign(self, node: Any) -> None:
        """Makes `node` this address's owner (once; Launchpad's name for
        `node.allocate_address(address)`)."""
        if self._owning_node is node:
            return
        if self._owning_node is not None:
            raise ValueError(f"{self!r} belongs to {self._owning_node!r} already; it cannot "
                             f"be allocated by {node!r} too")
        if self.name is None:
            self.name = f"lp{sum(1 for a in node.addresses if a.name.startswith('lp'))}"
        if any(a.name == self.name for a in node.addresses):
            raise ValueError(f"{node!r} already has an address named {self.name!r}")
        self._owning_node = node
        node.addresses.append(self)
        if node.is_added():
            self.attach(node.label, node.index)

    def attach(self, label: str, index: int) -> None:
        """Called when its node joins a program: the node's place there."""
        self.label = label
        self.index = index

    def bind(self, address_builder: AddressBuilder) -> None:
        """Resolves to `address_builder.build()` from now on (outside any launch)."""
        if not isinstance(address_builder, AddressBuilder):
            raise TypeError(f"Address.bind needs an address builder (with build()), got "
                            f"{address_builder!r}")
        self._address_builder = address_builder

    def unbind(self) -> None:
        """Forgets the address builder: a launch resolves the address through its program's
        controller, whatever it was bound to before (Launchpad's launchers bound every
        address anew; Mava's tests bind a node's, then launch it)."""
        self._address_builder = None

    @property
    def bound(self) -> bool:
        """Whether an address builder decides what it resolves to (see `bind`)."""
        return self._address_builder is not None

    def resolve(self, timeout: float = 60.0) -> str:
        """Returns 'host:port' of this address (waiting up to `timeout` seconds for its node
        to register it).

        Raises:
          RuntimeError: the address belongs to no node, or (outside a launch) is not bound.
          NodeNotReadyError: its node did not register it within `timeout`.
        """
        if self._address_builder is not None:
            return self._address_builder.build()
        if self.label is None:
            where = ("its node is in no program yet" if self._owning_node is not None else
                     "it belongs to no node: allocate it with node.allocate_address(address)")
            raise RuntimeError(f"{self!r} cannot be resolved: {where}")
        return context.current().controller.resolve(self.label, self.index, self.name or "",
                                                     timeout)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_owning_node": None}

    def __repr__(self) -> str:
        owner = f" of {self.label}/{self.index}" if self.label is not None else ""
        return f"Address({self.name!r}{owner})"


def get_port_from_address(address: str) -> int:
    """Returns the port of 'host:port', '[v6]:port' or 'scheme:host:port'; Launchpad's named
    ports ('host:NAME', the port in $LP_PORT_NAME) too.

    Raises:
      ValueError: the address has no numeric port (nor a named one that is set).
    """
    if not isinstance(address, str) or ":" not in address:
        raise ValueError(f"Address {address!r} has no port (expected 'host:port')")
    port = address.rsplit(":", 1)[1]
    if port.isdigit():
        return int(port)
    named = os.environ.get(f"LP_PORT_{port}", "")
    if named.isdigit():
        return int(named)
    raise ValueError(f"Address {address!r} has no numeric port (nor a port named {port!r} "
                     f"in $LP_PORT_{port})")


def routed_host(peer_host: str) -> str:
    """The address of this host's interface that traffic to `peer_host` leaves from: where a
    node on another host of the cluster reaches this one (no packet is sent)."""
    family = socket.AF_INET6 if ":" in peer_host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.connect((peer_host.strip("[]"), 9))
        return probe.getsockname()[0]
