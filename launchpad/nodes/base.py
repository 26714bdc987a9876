"""What every node type shares: the node (what runs) and its handle (what others hold).

A node describes its work; a launcher decides where it runs (a thread, a process, a job) and
calls `node.run()` there, inside the node's context (launchpad.context). Handles found anywhere
in a node's arguments - in lists, tuples, namedtuples, dicts, sets, dataclasses or `Deferred`
constructors - are turned into clients in the node's own process, just before its code runs.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import portpicker

from launchpad import context
from launchpad.address import Address
from launchpad.program import GraphNode, Program


class Handle(abc.ABC):
    """A reference to a node of a program; `dereference()` gives a client of it.

    A handle may be made before its node is added to a program (as for the nodes of a
    colocation); it reads the node's place when used. It pickles as (program name, label,
    index, options) and finds its program's controller through the context of the process
    that dereferences it.
    """

    def __init__(self, node: "Node"):
        self._node: Node | None = node  # not pickled
        self._identity: tuple[str, str, int] | None = None  # set when pickled

    def _where(self) -> tuple[str, str, int]:
        """(program name, label, index) of the node."""
        if self._node is None:
            return self._identity
        if not self._node.is_added():
            raise ValueError(f"A handle of {self._node!r} is used, but the node is in no "
                             "program: add it (or the colocation node holding it) first")
        return self._node.program_name, self._node.label, self._node.index

    @property
    def _program_name(self) -> str:
        return self._where()[0]

    @property
    def _label(self) -> str:
        return self._where()[1]

    @property
    def _index(self) -> int:
        return self._where()[2]

    @property
    def node_name(self) -> str:
        return f"{self._label}/{self._index}"

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_node": None, "_identity": self._where()}

    @abc.abstractmethod
    def dereference(self) -> Any:
        """Returns a client of the node in the running program."""

    def _program_context(self) -> context.NodeContext:
        """The running program's context as seen from here (a node, or the launcher)."""
        found = context.current_or_none()
        if found is not None and found.program_name == self._program_name:
            return found
        program = self._node.program if self._node is not None else None
        launched = context.launch_of(program) if program is not None else None
        if launched is not None:
            return launched
        raise context.NoContextError(
            f"Handle of node {self.node_name} of program {self._program_name!r} can only be "
            "dereferenced in a node of that program, or after lp.launch() of it")

    def __repr__(self) -> str:
        if self._node is not None and not self._node.is_added():
            return f"<{type(self).__name__} of {self._node!r}>"
        return f"<{type(self).__name__} {self._program_name}:{self.node_name}>"


class UnservedHandle(Handle):
    """Handle of a node that serves nothing (PyNode, PyClassNode): it cannot be called."""

    def dereference(self) -> Any:
        raise TypeError(
            f"Node {self.node_name} of program {self._program_name!r} serves no methods, so "
            "its handle cannot be dereferenced; use lp.CourierNode to call a node")


class Node(GraphNode):
    """Base of every node type."""

    def __init__(self):
        self.program: Program | None = None
        self.program_name = ""
        self.label = ""
        self.index = -1
        self.addresses: list[Address] = []

    def is_added(self) -> bool:
        return self.program is not None

    def bind_to_program(self, program: "Program", label: str, index: int) -> None:
        """Called by `Program.add_node`: the node's place in its program."""
        self.program = program
        self.program_name = program.name
        self.label = label
        self.index = index
        for address in self.addresses:
            address.attach(label, index)

    @property
    def name(self) -> str:
        return f"{self.label}/{self.index}"

    def companion_nodes(self) -> list["Node"]:
        """Nodes that join the program with this one, in its group right after it (the other
        tasks of a ReplicatedNode); `Program.add_node` adds them."""
        return []

    def needs_own_process(self) -> str | None:
        """Why this node cannot run as a thread beside other nodes (None: it can); thread
        launchers refuse it with this reason."""
        return None

    def all_nodes(self) -> list["Node"]:
        """This node and the nodes it runs inside it (a colocation's), depth first."""
        return [self] + [deeper for inner in self.inner_nodes() for deeper in inner.all_nodes()]

    def inner_nodes(self) -> list["Node"]:
        return []

    def arguments(self) -> Any:
        """What the node's code receives (as `dereference_all` walks it): its handles are the
        nodes it calls."""
        return ()

    def callees(self) -> list["Node"]:
        found: list[Node] = []
        for handle in handles_in(self.arguments()):
            node = handle._node
            if node is not None and not any(node is seen for seen in found):
                found.append(node)
        return found

    def kind(self) -> str:
        """The launchpad node type this node is (a user's subclass of CourierNode is a
        CourierNode)."""
        for cls in type(self).__mro__:
            if cls.__module__.startswith("launchpad.nodes.") and not cls.__name__.startswith("_"):
                return cls.__name__
        return type(self).__name__

    def runs(self) -> str:
        return ""

    def allocate_address(self, name: str) -> Address:
        """Reserves a named address for this node (a port it serves on besides courier)."""
        if not name:
            raise ValueError("An allocated address needs a name ('' is the node's own)")
        if any(a.name == name for a in self.addresses):
            raise ValueError(f"Node already has an address named {name!r}")
        address = Address(name)
        if self.program is not None:
            address.attach(self.label, self.index)
        self.addresses.append(address)
        return address

    def __getstate__(self) -> dict:
        return {**self.__dict__, "program": None}

    @abc.abstractmethod
    def create_handle(self) -> Handle:
        """The handle `Program.add_node` returns for this node."""

    def run(self) -> None:
        """Runs the node inside its context (launchers call this); returns when it is done.

        First every address the node allocated gets a free port of this host, registered with
        the program's controller, so `Address.resolve()` works anywhere in the program.
        """
        node_context = context.current()
        for address in self.addresses:
            port = portpicker.pick_unused_port()
            node_context.controller.register(self.label, self.index, address.name,
                                             node_context.endpoint(port))
        self.execute()

    @abc.abstractmethod
    def execute(self) -> None:
        """What the node does in its own thread or process (see `run`)."""

    @abc.abstractmethod
    def default_label(self) -> str:
        """The group label `make_program` uses for this node."""

    def __repr__(self) -> str:
        where = f" {self.name}" if self.program is not None else ""
        return f"<{type(self).__name__}{where} {self.default_label()}>"


def run_in_context(node: Node, node_context: context.NodeContext) -> BaseException | None:
    """Runs `node` on this thread inside `node_context`; returns what it raised, or None.

    The one place a node's code runs: in a runner (a thread or process a launcher started)
    and in a MultiThreadingColocation's threads. Whoever called it reports the outcome."""
    token = context.enter(node_context)
    try:
        node.run()
    except BaseException as e:  # noqa: BLE001 - the caller reports it, whatever it is
        return e
    finally:
        context.leave(token)
    return None


class Deferred:
    """A constructor call made in the node's process, after handles in its arguments became
    clients: `lp.Deferred(make_env, seed)` passes `make_env(seed)` to the node."""

    def __init__(self, ctor: Callable[..., Any], /, *args, **kwargs):
        if not callable(ctor):
            raise TypeError(f"Deferred needs a callable, got {ctor!r}")
        self._ctor = ctor
        self._args = args
        self._kwargs = kwargs

    def build(self) -> Any:
        return self._ctor(*dereference_all(self._args), **dereference_all(self._kwargs))

    def __repr__(self) -> str:
        return f"Deferred({getattr(self._ctor, '__qualname__', self._ctor)!r})"


def name_of(function: Any) -> str:
    """The name of a function or class (of the function a functools.partial calls)."""
    while isinstance(function, functools.partial):
        function = function.func
    return getattr(function, "__name__", type(function).__name__)


def dereference_all(value: Any) -> Any:
    """Returns `value` with every handle replaced by its client and every Deferred built."""
    return _rebuild(value, lambda leaf: leaf.dereference() if isinstance(leaf, Handle)
                    else leaf.build())


def handles_in(value: Any) -> list[Handle]:
    """Every handle `dereference_all(value)` would turn into a client (also those in the
    arguments of a Deferred), in order."""
    found: list[Handle] = []

    def collect(leaf: Handle | Deferred) -> Any:
        if isinstance(leaf, Handle):
            found.append(leaf)
        else:
            found.extend(handles_in((leaf._args, leaf._kwargs)))
        return leaf

    _rebuild(value, collect)
    return found


def _rebuild(value: Any, leaf: Callable[[Handle | Deferred], Any]) -> Any:
    """`value` with `leaf(x)` for each handle or Deferred x in it, in lists, tuples,
    namedtuples, sets, dicts (values) and dataclasses (their init fields)."""
    if isinstance(value, (Handle, Deferred)):
        return leaf(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_rebuild(v, leaf) for v in value))
    if isinstance(value, (list, tuple, set, frozenset)):
        return type(value)(_rebuild(v, leaf) for v in value)
    if isinstance(value, dict):
        rebuilt = {k: _rebuild(v, leaf) for k, v in value.items()}
        if type(value) is dict:
            return rebuilt
        copy = value.copy()  # keeps OrderedDict / defaultdict and their settings
        copy.update(rebuilt)
        return copy
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _rebuild(getattr(value, f.name), leaf)
                   for f in dataclasses.fields(value) if f.init}
        if all(changes[k] is getattr(value, k) for k in changes):
            return value
        return dataclasses.replace(value, **changes)
    return value
