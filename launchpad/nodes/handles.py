"""A handle: what a node's holder has of it in the graph, and a client of it once running.

A handle may be made before its node is added to a program (as for the nodes of a
colocation); it reads the node's place when used. It pickles as (program name, label, index,
options) and finds its program's controller through the context of the process that
dereferences it. Each node type's handle (courier's, Reverb's, a group's) subclasses it.
"""

from __future__ import annotations

import abc
import copy
from typing import TYPE_CHECKING, Any

from launchpad import context
from launchpad.errors import NoContextError
from launchpad.nodes.dereference import Dereferenceable

if TYPE_CHECKING:  # (a node tracks its handles: base.py imports this module)
    from launchpad.nodes.base import Node


class Handle(Dereferenceable):
    """A reference to a node of a program; `dereference()` gives a client of it.

    A handle may be made before its node is added to a program (as for the nodes of a
    colocation); it reads the node's place when used. It pickles as (program name, label,
    index, options) and finds its program's controller through the context of the process
    that dereferences it.
    """

    # The large modules the client this handle becomes imports when used: a node holding
    # the handle may be started as a fork of a process that has them imported already, so
    # that it shares their pages instead of importing them again (Node.heavy_imports).
    client_imports: tuple[str, ...] = ()

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

    def sibling(self, index: int) -> "Handle":
        """The same kind of handle, of node `index` of this one's group (a member a running
        program's group grew by)."""
        program_name, label, _ = self._where()
        made = copy.copy(self)
        made._node = None
        made._identity = (program_name, label, index)
        return made

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
