"""What every node type shares: the node (what runs), made of its arguments and handles.

A node describes its work; a launcher decides where it runs (a thread, a process, a job) and
calls `node.run()` there, inside the node's context (running.py). Handles found anywhere
in a node's arguments - in lists, tuples, namedtuples, dicts, sets, dataclasses or `Deferred`
constructors - are turned into clients in the node's own process, just before its code runs
(handles.py; `Handle` is importable from here too, Launchpad's path of it).
"""

from __future__ import annotations

import abc
import functools
from typing import Any

from launchpad import context, stopping
from launchpad.address import Address
from launchpad.nodes import group
from launchpad.nodes.dereference import placeholders_in
from launchpad.nodes.handles import Handle
from launchpad.program import GraphNode, Program


class Node(GraphNode):
    """Base of every node type."""

    def __new__(cls, /, *args: Any, **kwargs: Any) -> "Node":  # (a user's keyword `cls` too)
        node = super().__new__(cls)
        node._made_with = (args, kwargs)  # what `replica` makes its copies with
        return node

    def replica(self) -> "Node":
        """A new node made as this one was: its type's constructor, called again with the
        same arguments (the same handles: the same edges). A group grows by these.

        Raises:
          ValueError: the constructor refused (e.g. an `lp.Address` among the arguments,
            which can belong to one node only), said with the node's name.
        """
        args, kwargs = self._made_with
        try:
            made = type(self)(*args, **kwargs)
        except Exception as e:
            raise ValueError(f"Cannot make another node like {self!r}: its constructor, "
                             f"called again with its arguments, raised "
                             f"{type(e).__name__}: {e}") from e
        if len(made.addresses) != len(self.addresses):
            raise ValueError(f"Cannot make another node like {self!r}: addresses were "
                             "allocated to it after it was made (allocate_address), which a "
                             "node made again would share; allocate them in its constructor")
        return made

    def __init__(self):
        self.program: Program | None = None
        self.program_name = ""
        self.label = ""
        self.index = -1
        self.addresses: list[Address] = []
        # Every handle made of this node, in order (Launchpad's; its tests and subclasses
        # read it). Where the node runs it is empty: handles are the graph's, not the node's.
        self._created_handles: list[Handle] = []
        self._launch_context = context.LaunchContext()  # set at launch (Launchpad's)

    @property
    def launch_context(self) -> context.LaunchContext:
        """The node's launch type and launch config, once launched (Launchpad's)."""
        return self._launch_context

    def _initialize_context(self, launch_type: context.LaunchType | str,
                            launch_config: Any) -> None:
        """Sets the node's launch context: `lp.launch` calls it for every node, as
        Launchpad's launchers did (and custom launchers built on them do)."""
        launch_type = context.launch_type_of(launch_type)  # (an engine's own, if not ours)
        self._launch_context.initialize(launch_type, launch_config,
                                        stopping.ProgramStopper(launch_type))

    def bind_addresses(self, **kwargs: Any) -> None:
        """Launchpad's hook by which its launchers bound a node's addresses; ours register
        them with the program's controller as the node runs, so it does nothing."""
        del kwargs

    @staticmethod
    def to_executables(nodes: Any, label: str, launch_context: Any) -> Any:
        """Launchpad's launchers turned nodes into executables; ours run `node.run()`."""
        raise NotImplementedError(
            f"launchpad's launchers run node.run() where a node is placed, not executables "
            f"(group {label!r}); a node type written for Launchpad's launchers needs a run()")

    def is_added(self) -> bool:
        return self.program is not None

    def bind_to_program(self, program: "Program", label: str, index: int) -> None:
        """Called by `Program.add_node`: the node's place in its program."""
        self.program = program
        self.program_name = program.name
        self.label = label
        self.index = index
        for address in self.own_addresses():
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

    def named_arguments(self) -> list[tuple[str, str, Any]]:
        """What the user gave the node, each as (what it is, where it is, the value): e.g.
        ('its function', 'function', f), ("its argument 'holder'", 'args[1]', h); what an
        error names when one does not pickle (runtime/serialization.py)."""
        return []

    def callees(self) -> list["Node"]:
        found: list[Node] = []
        for handle in handles_in(self.arguments()):
            node = handle._node
            if node is not None and not any(node is seen for seen in found):
                found.append(node)
        return found

    def called_groups(self) -> list[str]:
        labels = [placeholder.group_label() for placeholder in placeholders_in(self.arguments())
                  if isinstance(placeholder, group.GroupHandle)]
        return list(dict.fromkeys(label for label in labels if label))

    def create_group_handle(self, nodes: list[GraphNode]) -> Any:
        return group.GroupHandle([node.create_handle() for node in nodes],
                                 follows=nodes[0].label)

    def kind(self) -> str:
        """The launchpad node type this node is (a user's subclass of CourierNode is a
        CourierNode)."""
        for cls in type(self).__mro__:
            if cls.__module__.startswith("launchpad.nodes.") and not cls.__name__.startswith("_"):
                return cls.__name__
        return type(self).__name__

    def runs(self) -> str:
        return ""

    def allocate_address(self, address: Address | str) -> Address:
        """Reserves an address of this node (a port it serves on besides courier): an
        `lp.Address` (Launchpad's way: the same object then resolves wherever it is passed),
        or a name for a new one; returns the Address."""
        if isinstance(address, str):
            if not address:
                raise ValueError("An allocated address needs a name ('' is the node's own)")
            address = Address(address)
        elif not isinstance(address, Address):
            raise TypeError(f"allocate_address takes an lp.Address or a name, got {address!r}")
        address.assign(self)
        return address

    def own_addresses(self) -> list[Address]:
        """The addresses this node owns (`addresses` also lists those of the nodes a
        colocation holds, as Launchpad's did)."""
        # Once pickled (where it runs), an address knows its owner by its place only.
        return [a for a in self.addresses if a._owning_node is self
                or (a._owning_node is None and a.label is not None
                    and (a.label, a.index) == (self.label, self.index))]

    # The large modules this node type's own code imports where it runs (see heavy_imports).
    own_imports: tuple[str, ...] = ()

    def heavy_imports(self) -> tuple[str, ...]:
        """The large modules this node's process will import: its type's own and those of the
        clients its handles become. A launcher may start the node as a fork of a process that
        has them imported already, so that the node shares their pages (a few hundred MB for
        TensorFlow) and their import time with every node that needs the same ones."""
        found = {module for handle in self.input_handles for module in handle.client_imports}
        return tuple(sorted(found.union(self.own_imports)))

    @property
    def input_handles(self) -> list[Handle]:
        """The handles in the node's arguments: the nodes it calls (Launchpad's name)."""
        return handles_in(self.arguments())

    _input_handles = input_handles  # Launchpad's attribute, read by code written for it

    @property
    def function(self) -> Any:
        """What runs the node: `node.function()` runs it (Launchpad's name)."""
        return self.run

    def _track_handle(self, handle: Handle) -> Handle:
        """Records `handle` as made of this node, once (Launchpad's hook, which its node
        types call in `create_handle`; ours record every handle as it is made)."""
        if not any(made is handle for made in self._created_handles):
            self._created_handles.append(handle)
        return handle

    def __getstate__(self) -> dict:
        # `_made_with` travels: a detached program's controller, in its cluster, grows a
        # group from it (its handles pickle as their nodes' names, as the node's own do).
        return {**self.__dict__, "program": None, "_created_handles": []}

    @abc.abstractmethod
    def create_handle(self) -> Handle:
        """The handle `Program.add_node` returns for this node."""

    @abc.abstractmethod
    def run(self) -> None:
        """What the node does, in its own thread or process; returns when it is done.

        Launchers call it through `run_in_context`, inside the node's context; Launchpad's
        unit tests call it themselves, outside any launch (standalone: the node's addresses
        bound with `Address.bind`). A subclass may override it.
        """

    @abc.abstractmethod
    def default_label(self) -> str:
        """The group label `make_program` uses for this node."""

    def __repr__(self) -> str:
        where = f" {self.name}" if self.program is not None else ""
        return f"<{type(self).__name__}{where} {self.default_label()}>"


def registers_own_address(node: Node, node_type: type[Node]) -> bool:
    """Whether `node` runs `node_type.run`, which registers the node's server address itself
    once the server is up. A subclass's run() of its own - Launchpad's way: serve on the port
    of `self._address.resolve()` - has the address registered before it runs, as any other."""
    return type(node).run is node_type.run


def name_of(function: Any) -> str:
    """The name of a function or class (of the function a functools.partial calls)."""
    while isinstance(function, functools.partial):
        function = function.func
    return getattr(function, "__name__", type(function).__name__)


def handles_in(value: Any) -> list[Handle]:
    """Every handle `dereference_all(value)` would turn into a client (also those in the
    arguments of a Deferred), in order."""
    return [found for found in placeholders_in(value) if isinstance(found, Handle)]


def extract_handles(obj: Any, handles: list[Handle], visited: set[int] | None = None) -> None:
    """Appends to `handles` the handles in `obj` (also those in a Deferred's arguments):
    Launchpad's walk, kept for code that called it (`handles_in` is ours)."""
    del visited  # a Deferred is walked once by handles_in
    handles.extend(handles_in(obj))
