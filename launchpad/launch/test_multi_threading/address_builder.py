"""Addresses for nodes run outside any launch, as Launchpad's unit tests run them."""

from __future__ import annotations

from collections.abc import Sequence

from launchpad.address import SimpleLocalAddressBuilder
from launchpad.nodes.base import Node


def bind_addresses(nodes: Sequence[Node]) -> None:
    """Binds every address of `nodes` (a colocation's: its nodes' too) to a free port of
    this host, so that `node.run()` serves there and `handle.dereference()` reaches it."""
    for node in nodes:
        for address in node.addresses:
            address.bind(SimpleLocalAddressBuilder())
