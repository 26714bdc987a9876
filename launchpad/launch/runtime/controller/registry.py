"""Where each node of a running program can be reached: the controller's address registry.

    node binds its port -> register(label, index, name, address, host_id)
    a handle is used    -> future(label, index, name, timeout): set when the node registers,
                           at once if it has; NodeNotReadyError if it does not in time
    node restarting     -> node_restarting(unit): its addresses are forgotten, and lookups wait
                           for it to register again
    node ended          -> node_ended(unit, why): lookups fail with NodeEndedError
    node replaced       -> node_replacing(unit): as restarting, through the old node's end,
                           until add_unit knows the new one (`apply`)
    program stopping    -> program_stopping(): lookups of what is not known fail

A *unit* is what runs, ends and restarts as one: a node, or the colocation that holds it; an
address belongs to a node, and is forgotten with its unit.
"""

from __future__ import annotations

import concurrent.futures
import math
import threading

from launchpad.courier import settle
from launchpad.launch.runtime import errors

NodeKey = tuple  # (label, index)


class AddressRegistry:
    """The addresses of one program's nodes (see the module doc); thread-safe.

    Args:
      program_name: names the program in errors.
      unit_of: (label, index) of every node that has an address -> that of its unit.
    """

    def __init__(self, program_name: str, unit_of: dict[NodeKey, NodeKey]):
        self._program = program_name
        self._unit_of = unit_of
        self._lock = threading.Lock()
        self._addresses: dict[tuple, str] = {}  # (label, index, name) -> host:port
        self._host_ids: dict[tuple, str] = {}  # (label, index, name) -> its host identity
        self._waiting: dict[tuple, list[concurrent.futures.Future]] = {}
        self._ended: set[NodeKey] = set()
        self._replacing: set[NodeKey] = set()
        self._stopping = False

    def check_node(self, label: str, index: int) -> NodeKey:
        """The unit of node label/index.

        Raises:
          UnknownNodeError: the program has no such node (its nodes are listed).
        """
        try:
            return self._unit_of[(label, index)]
        except KeyError:
            raise errors.UnknownNodeError(
                f"Program {self._program!r} has no node {label}/{index}; its nodes are "
                f"{', '.join(sorted(f'{lb}/{i}' for lb, i in self._unit_of))}") from None

    def add_unit(self, unit: NodeKey, nodes: list[NodeKey]) -> None:
        """A group grew: `unit` and the nodes it runs (itself, or a colocation's)."""
        with self._lock:
            for node in nodes:
                self._unit_of[node] = unit
            self._replacing.discard(unit)
            self._ended.discard(unit)

    def remove_unit(self, unit: NodeKey) -> None:
        """A group shrank: `unit` and its nodes are no more (lookups of them fail, named)."""
        with self._lock:
            self._forget_addresses(unit)
            for node in [node for node, of in self._unit_of.items() if of == unit]:
                del self._unit_of[node]
            self._ended.discard(unit)

    def register(self, label: str, index: int, name: str, address: str,
                 host_id: str = "") -> None:
        self.check_node(label, index)
        key = (label, index, name)
        with self._lock:
            self._addresses[key] = address
            self._host_ids[key] = host_id
            waiting = self._waiting.pop(key, [])
        for future in waiting:
            settle(future, address)

    def future(self, label: str, index: int, name: str,
               timeout: float) -> concurrent.futures.Future:
        """A future of the node's address: set when it registers, failed after `timeout`
        seconds (a timeout too long for a timer, infinity among them, never fails it).

        Raises:
          UnknownNodeError, ProgramStoppedError, NodeEndedError: named in the message.
          ValueError: the timeout is NaN.
        """
        unit = self.check_node(label, index)
        if isinstance(timeout, float) and math.isnan(timeout):
            raise ValueError(f"resolve's timeout must be a number of seconds, not {timeout}")
        key = (label, index, name)
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if key in self._addresses:
                future.set_result(self._addresses[key])
                return future
            if self._stopping:
                raise errors.ProgramStoppedError(
                    f"Program {self._program!r} is stopping; node {label}/{index} "
                    "will not be reachable")
            if unit in self._ended:
                raise errors.NodeEndedError(
                    f"Node {label}/{index} of {self._program!r} is no longer running "
                    "(it finished or failed)")
            self._waiting.setdefault(key, []).append(future)
        if timeout > threading.TIMEOUT_MAX:
            return future
        timer = threading.Timer(timeout, self._expire, (key, future, timeout))
        timer.daemon = True
        timer.start()
        future.add_done_callback(lambda _: timer.cancel())
        return future

    def host_of(self, label: str, index: int, name: str) -> str:
        """The host identity the address was registered with ('' if it is not known now)."""
        with self._lock:
            return self._host_ids.get((label, index, name), "")

    def addresses_by_unit(self) -> dict[NodeKey, dict[str, str]]:
        """unit -> the addresses its nodes have registered ('label/index' of an inner node
        of a colocation, then ':name' if the address has one -> host:port)."""
        found: dict[NodeKey, dict[str, str]] = {}
        with self._lock:
            for (label, index, name), address in self._addresses.items():
                key = f"{label}/{index}" + (f":{name}" if name else "")
                found.setdefault(self._unit_of[(label, index)], {})[key] = address
        return found

    def node_restarting(self, unit: NodeKey) -> None:
        """Forgets the unit's addresses: lookups wait for its nodes to register again."""
        with self._lock:
            self._forget_addresses(unit)

    def node_replacing(self, unit: NodeKey) -> None:
        """The unit is being replaced by a new one of its place: lookups wait for the new
        one to register, while the old one ends (its end is no end for them)."""
        with self._lock:
            self._replacing.add(unit)
            self._forget_addresses(unit)

    def node_ended(self, unit: NodeKey, why: str) -> None:
        """The unit ended for good: lookups of its nodes fail, waiting ones with `why`."""
        with self._lock:
            if unit in self._replacing:
                self._forget_addresses(unit)
                return
            self._ended.add(unit)
            self._forget_addresses(unit)
            waiting = [(key, future) for key in [k for k in self._waiting
                                                 if self._unit_of[k[:2]] == unit]
                       for future in self._waiting.pop(key)]
        for key, future in waiting:
            settle(future, exception=errors.NodeEndedError(
                f"No address for node {key[0]}/{key[1]}: {why}"))

    def program_stopping(self) -> None:
        """Lookups of addresses not known by now fail with ProgramStoppedError."""
        with self._lock:
            self._stopping = True

    def _forget_addresses(self, unit: NodeKey) -> None:
        for key in [k for k in self._addresses if self._unit_of[k[:2]] == unit]:
            del self._addresses[key]
            self._host_ids.pop(key, None)

    def _expire(self, key: tuple, future: concurrent.futures.Future, timeout: float) -> None:
        label, index, name = key
        with self._lock:
            if future in self._waiting.get(key, []):
                self._waiting[key].remove(future)
        what = f"address {name!r}" if name else "address"
        settle(future, exception=errors.NodeNotReadyError(
            f"Node {label}/{index} of {self._program!r} did not register its {what} "
            f"within {timeout:g}s"))
