"""What every node type shares: the node (what runs) and its handle (what others hold).

A node describes its work; a launcher decides where it runs (a thread, a process, a job) and
calls `node.run()` there, inside the node's context (launchpad.context). Handles found anywhere
in a node's arguments - in lists, tuples, namedtuples, dicts, sets, dataclasses or `Deferred`
constructors - are turned into clients in the node's own process, just before its code runs.
"""

from __future__ import annotations

import abc
import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import portpicker

from launchpad import context, stopping
from launchpad.address import Address
from launchpad.errors import NoContextError
from launchpad.nodes import thread_interrupt
from launchpad.nodes.dereference import Dereferenceable, placeholders_in
from launchpad.nodes.errors import Interrupted
from launchpad.program import GraphNode, Program


class Handle(Dereferenceable):
    """A reference to a node of a program; `dereference()` gives a client of it.

    A handle may be made before its node is added to a program (as for the nodes of a
    colocation); it reads the node's place when used. It pickles as (program name, label,
    index, options) and finds its program's controller through the context of the process
    that dereferences it.
    """

    def __init__(self, node: "Node"):
        self._node: Node | None = node  # not pickled
        self._identity: tuple[str, str, int] | None = None  # set when pickled
        node._track_handle(self)

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

    def __getattr__(self, name: str) -> Any:
        # Only for attributes a handle does not have: a method of its node called on the
        # handle itself, before it became a client.
        if name.startswith("_"):
            raise AttributeError(name)
        raise AttributeError(f"{type(self).__name__} object has no attribute {name!r}: a "
                             "handle is turned into a client of its node where it is used "
                             "(a node's arguments are, by themselves); elsewhere call "
                             "handle.dereference() first")

    @abc.abstractmethod
    def dereference(self) -> Any:
        """Returns a client of the node in the running program."""

    def connect(self, node: "Node", label: str) -> None:
        """Told, at launch, of the node that holds it (Launchpad's hook for handle types that
        configure themselves for their holder); ours need nothing."""

    def transform(self, executables: Any) -> Any:
        """Launchpad's hook over its launchers' executables; ours have none to change."""
        return executables

    def _program_context(self) -> context.NodeContext:
        """The running program's context as seen from here (a node, or the launcher)."""
        found = context.current_or_none()
        if found is not None and found.program_name == self._program_name:
            return found
        program = self._node.program if self._node is not None else None
        launched = context.launch_of(program) if program is not None else None
        if launched is not None:
            return launched
        raise NoContextError(
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
        self._launch_context.initialize(launch_type, launch_config,
                                        stopping.make_program_stopper(launch_type))

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

    def callees(self) -> list["Node"]:
        found: list[Node] = []
        for handle in handles_in(self.arguments()):
            node = handle._node
            if node is not None and not any(node is seen for seen in found):
                found.append(node)
        return found

    def called_groups(self) -> list[str]:
        from launchpad.nodes import group  # (group.py builds on this module)
        labels = [placeholder.group_label() for placeholder in placeholders_in(self.arguments())
                  if isinstance(placeholder, group.GroupHandle)]
        return list(dict.fromkeys(label for label in labels if label))

    def create_group_handle(self, nodes: list[GraphNode]) -> Any:
        from launchpad.nodes import group  # (group.py builds on this module)
        return group.GroupHandle([node.create_handle() for node in nodes])

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


@contextlib.contextmanager
def running_context() -> Iterator[context.NodeContext]:
    """The context a node's run sees: its own, or - for a node run outside any launch - the
    process's standalone one, entered for the run (so the node's code finds it)."""
    found = context.current_or_none()
    if found is not None:
        yield found
        return
    outside = context.outside()
    token = context.enter(outside)
    try:
        yield outside
    finally:
        context.leave(token)


def running_state() -> Any:
    """The saved states of the node running here (a NodeState of the launcher's), or None
    when its group keeps no state or no launched node runs here."""
    found = context.current_or_none()
    return found.state if found is not None else None


def run_keeping_state(run: Callable[[], Any]) -> None:
    """Runs a node's object's `run()`. When the node keeps state: a save that fails ends the
    run at once, as the node's failure (thread_interrupt.py); a run that raises saves the
    state first, its object still able to answer (for the restart, or a later resume)."""
    state = running_state()
    if state is None or not state.attached:
        run()
        return
    interrupt = thread_interrupt.ThreadInterrupt()
    state.when_save_fails(interrupt.fire)
    try:
        try:
            run()
        except Exception:
            state.save_after_failure(context.current().termination_notice_secs)
            raise
        finally:
            state.when_save_fails(None)
            interrupt.disarm()
    except Interrupted:
        raise state.failure from None
    if state.failure is not None:
        raise state.failure


def run_in_context(node: Node, node_context: context.NodeContext) -> BaseException | None:
    """Runs `node` on this thread inside `node_context`; returns what it raised, or None.

    The one place a node's code runs: in a runner (a thread or process a launcher started)
    and in a MultiThreadingColocation's threads. Whoever called it reports the outcome.

    First every address the node allocated (but those its servers register themselves) gets
    a free port of this host, registered with the program's controller, so that
    `Address.resolve()` works anywhere in the program once the node's code runs."""
    if node.launch_context.initialized:
        node_context.launch_config = node.launch_context.launch_config
    token = context.enter(node_context)
    try:
        if not node_context.standalone:
            for address in node.own_addresses():
                if not address.registered_by_node and not address.bound:
                    node_context.controller.register(
                        node.label, node.index, address.name,
                        node_context.endpoint(portpicker.pick_unused_port()))
        node.run()
    except BaseException as e:  # noqa: BLE001 - the caller reports it, whatever it is
        return e
    finally:
        context.leave(token)
    return None


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
