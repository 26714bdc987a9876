"""`Program`: the graph of nodes a user builds and a launcher runs.

A program is a dict of groups (label -> nodes). `add_node` returns the node's handle; passing
that handle to another node's constructor is the edge. Nothing runs until `lp.launch`.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import typing
from collections.abc import Iterator, Sequence
from typing import Any

from launchpad import dot


@typing.runtime_checkable
class HandleMaker(typing.Protocol):
    """An object that is no launchpad node but makes handles (a stand-in, as Launchpad's
    tests add to programs): kept as Launchpad kept it, and refused at launch."""

    def create_handle(self) -> Any:
        """A handle of it."""


class GraphNode(abc.ABC):
    """What a program needs of a node. `nodes.base.Node` is its one implementation; it is
    declared here, below the node types, so that the graph does not import them."""

    label: str
    index: int

    @abc.abstractmethod
    def is_added(self) -> bool:
        """Whether the node is in a program already."""

    @abc.abstractmethod
    def bind_to_program(self, program: Program, label: str, index: int) -> None:
        """Called by `Program.add_node`: the node's place in its program."""

    @abc.abstractmethod
    def companion_nodes(self) -> list[GraphNode]:
        """Nodes that join the program with this one, in its group right after it."""

    @abc.abstractmethod
    def create_handle(self) -> Any:
        """The handle `Program.add_node` returns for this node."""

    @abc.abstractmethod
    def create_group_handle(self, nodes: list[GraphNode]) -> Any:
        """One handle for `nodes` (the group this node is of): `Program.group_handle`'s."""

    @abc.abstractmethod
    def default_label(self) -> str:
        """The group label `make_program` uses for this node."""

    # What a picture of the program (launchpad/dot.py) shows of the node.

    @abc.abstractmethod
    def callees(self) -> list[GraphNode]:
        """The nodes whose handles this node's code receives (the nodes it calls), each once,
        in the order its arguments hold them."""

    @abc.abstractmethod
    def called_groups(self) -> list[str]:
        """The labels of the groups this node's code receives a group handle of (drawn as
        one edge to the group)."""

    @abc.abstractmethod
    def inner_nodes(self) -> list[GraphNode]:
        """The nodes this one runs inside itself (a colocation's), not added to the program
        themselves."""

    @abc.abstractmethod
    def kind(self) -> str:
        """The node's type as the user wrote it (e.g. "CourierNode")."""

    @abc.abstractmethod
    def runs(self) -> str:
        """What the node runs, in a few words (a function or class name; "" if nothing more
        than its kind can be said)."""


@dataclasses.dataclass(frozen=True)
class RestartPolicy:
    """What a group does when one of its nodes fails: restart it, up to `max_restarts` times
    per node, waiting `backoff_secs` before the first restart and twice as long before each
    next one (at most `max_backoff_secs`). Without a policy a failure stops the program."""

    max_restarts: int
    backoff_secs: float = 0.5
    max_backoff_secs: float = 30.0

    def __post_init__(self):
        if not isinstance(self.max_restarts, int) or self.max_restarts < 0:
            raise ValueError(f"max_restarts must be an int >= 0, got {self.max_restarts!r}")
        if self.backoff_secs < 0 or self.max_backoff_secs < self.backoff_secs:
            raise ValueError("need 0 <= backoff_secs <= max_backoff_secs, got "
                             f"{self.backoff_secs} and {self.max_backoff_secs}")

    def delay(self, restart: int) -> float:
        """Seconds to wait before restart number `restart` (1 for the first)."""
        return min(self.backoff_secs * 2 ** (restart - 1), self.max_backoff_secs)


@dataclasses.dataclass(frozen=True)
class StatePolicy:
    """What a group keeps of its nodes' state, so that a restarted node, or a resumed
    program (`lp.launch(..., resume=RUN_ID)`), starts where it was.

    A node's object that defines `save_state(self) -> object` and `restore_state(self,
    state)` is saved every `every_secs`, at a graceful stop (Slurm's time-limit signal and a
    pod's SIGTERM are graceful stops), when its run() raises (before its restart), and
    restored before it serves anything. The last
    `keep` states of each node are kept, in `dir` (default: the run's folder, ~/.launchpad,
    on the shared filesystem under Slurm), each written whole and private to its user. A
    save never runs while one of the node's courier handlers does, unless its class sets
    `save_state_concurrently = True`.
    """

    every_secs: float = 60.0
    keep: int = 3
    dir: str | None = None

    def __post_init__(self):
        if isinstance(self.every_secs, bool) or not (
                isinstance(self.every_secs, (int, float)) and self.every_secs > 0):
            raise ValueError(f"every_secs must be a number > 0, got {self.every_secs!r}")
        if isinstance(self.keep, bool) or not isinstance(self.keep, int) or self.keep < 1:
            raise ValueError(f"keep must be an int >= 1, got {self.keep!r}")
        if self.dir is not None and not isinstance(self.dir, str):
            raise TypeError(f"dir must be a path (str) or None, got {self.dir!r}")


class Program:
    """A named graph of nodes grouped by label."""

    def __init__(self, name: str):
        if not isinstance(name, str) or not name:
            raise ValueError(f"A program needs a non-empty name, got {name!r}")
        self._name = name
        self._groups: dict[str, list[GraphNode]] = {}
        self._current_group: str | None = None
        self._restart_policies: dict[str, RestartPolicy] = {}
        self._state_policies: dict[str, StatePolicy] = {}

    @property
    def name(self) -> str:
        return self._name

    @property
    def groups(self) -> dict[str, list[GraphNode]]:
        """label -> the nodes of that group, in the order they were added."""
        return self._groups

    def add_node(self, node: GraphNode, label: str | None = None) -> Any:
        """Adds `node` to the group `label` (or the open `group()`); returns its handle.

        An object that is no launchpad node but has `create_handle()` (a stand-in, as
        Launchpad's tests add) is kept as Launchpad kept nodes, and refused at launch.

        Raises:
          ValueError: no label and no open group, a label contradicting the open group, or a
            node added twice.
          TypeError: `node` is not a launchpad node.
        """
        if not isinstance(node, (GraphNode, HandleMaker)):
            raise TypeError(f"Program.add_node expects a launchpad node, got {node!r}; "
                            "wrap functions in lp.PyNode and classes in lp.CourierNode")
        if label is not None and not isinstance(label, str):
            raise TypeError(f"label must be a string, got {label!r}")
        if label and self._current_group and label != self._current_group:
            raise ValueError(
                f"The given label does not match the current group: {label!r} vs "
                f"{self._current_group!r} (inside program.group(...) omit the label or pass "
                "the group's own)")
        label = label or self._current_group
        if not label:
            raise ValueError("Label should not be empty. Pass label= to add_node, or add the "
                             "node inside `with program.group(label):`")
        group = self._groups.setdefault(label, [])
        if not isinstance(node, GraphNode):
            group.append(node)
            return node.create_handle()
        if node.is_added():
            raise ValueError(f"{node!r} is already in a program (as {node.label!r}); "
                             "create a new node object for each node of the program")
        for added in [node, *node.companion_nodes()]:
            added.bind_to_program(self, label, len(group))
            group.append(added)
        return node.create_handle()

    def pop_node(self, label: str) -> GraphNode:
        """Removes the last node of group `label` (a running program's group shrinking: its
        controller's `scale`); returns it.

        Raises:
          ValueError: no such group, or its only node (a group is never empty).
        """
        group = self._groups.get(label)
        if not group:
            raise ValueError(f"Program {self.name!r} has no group {label!r}")
        if len(group) == 1:
            raise ValueError(f"Group {label!r} of program {self.name!r} has one node left, "
                             "which stays")
        return group.pop()

    def replace_node(self, node: GraphNode) -> None:
        """Puts `node`, of another program of this name, in the place of this program's
        node of its label and index (a running program's node replaced: its controller's
        `apply`).

        Raises:
          ValueError: no such node here.
        """
        group = self._groups.get(node.label, [])
        if not 0 <= node.index < len(group):
            raise ValueError(f"Program {self.name!r} has no node {node.label}/{node.index}")
        node.bind_to_program(self, node.label, node.index)
        group[node.index] = node

    def adopt_node(self, node: GraphNode) -> None:
        """Puts `node`, of another program of this name, at the end of its group (made if
        new): a node a running program gains (its controller's `apply`).

        Raises:
          ValueError: its index is not the group's next one.
        """
        group = self._groups.setdefault(node.label, [])
        if node.index != len(group):
            raise ValueError(f"Node {node.label}/{node.index} cannot join group "
                             f"{node.label!r} of program {self.name!r}, which has "
                             f"{len(group)} nodes")
        node.bind_to_program(self, node.label, node.index)
        group.append(node)

    @property
    def restart_policies(self) -> dict[str, RestartPolicy]:
        """label -> the restart policy of that group (groups without one fail fast)."""
        return dict(self._restart_policies)

    def set_restart_policy(self, label: str, policy: RestartPolicy | None) -> None:
        """Sets (None: removes) the restart policy of group `label`."""
        _set_policy(self._restart_policies, label, policy, RestartPolicy, "restart")

    @property
    def state_policies(self) -> dict[str, StatePolicy]:
        """label -> what that group keeps of its nodes' state (groups without one keep none)."""
        return dict(self._state_policies)

    def set_state_policy(self, label: str, policy: StatePolicy | None) -> None:
        """Sets (None: removes) the state policy of group `label`."""
        _set_policy(self._state_policies, label, policy, StatePolicy, "state")

    @contextlib.contextmanager
    def group(self, label: str, *, restart: RestartPolicy | None = None,
              state: StatePolicy | None = None) -> Iterator[None]:
        """Adds every node added inside the `with` block to the group `label`.

        Args:
          label: the group's label.
          restart: restart the group's nodes when they fail (see RestartPolicy); by default
            a failing node stops the program.
          state: keep the group's nodes' state (see StatePolicy); by default a node starts
            from nothing, each time.
        """
        if not isinstance(label, str) or not label:
            raise ValueError(f"Label should not be empty. A group's label must be a "
                             f"non-empty string, got {label!r}")
        if self._current_group is not None:
            raise ValueError(f"group() cannot be nested. group({label!r}) was opened inside "
                             f"group({self._current_group!r})")
        if restart is not None:
            self.set_restart_policy(label, restart)
        if state is not None:
            if not isinstance(state, StatePolicy):
                raise TypeError(f"state of group {label!r} must be an lp.StatePolicy, got "
                                f"{state!r}")
            self._state_policies[label] = state
        self._current_group = label
        try:
            yield
        finally:
            self._current_group = None

    def group_handle(self, label: str) -> Any:
        """One handle for every node of group `label` (an lp.GroupHandle): passed to a node,
        it becomes a GroupClient there, which calls the whole group at once.

        Raises:
          ValueError: the program has no such group.
        """
        nodes = self._groups.get(label)
        if not nodes:
            raise ValueError(f"Program {self._name!r} has no group {label!r}; its groups: "
                             f"{', '.join(self._groups) or 'none yet'}")
        return nodes[0].create_group_handle(nodes)

    @property
    def current_group(self) -> str:
        """The label of the open `group()`.

        Raises:
          ValueError: no group is open.
        """
        if self._current_group is None:
            raise ValueError("Current group is only available in group context.")
        return self._current_group

    def get_all_nodes(self) -> list[GraphNode]:
        return [node for nodes in self._groups.values() for node in nodes]

    def node_keys(self, labels: Sequence[str] | str | None = None) -> set[tuple[str, int]]:
        """(label, index) of every node of groups `labels` (a label, a list of them; None:
        every group).

        Raises:
          TypeError: `labels` is not a label or a list of them.
          ValueError: a label names no group of the program.
        """
        if isinstance(labels, str):
            labels = [labels]
        elif labels is not None and not isinstance(labels, (list, tuple, set, frozenset)):
            raise TypeError(f"Expected a list of group labels, got {labels!r}")
        unknown = sorted(set(labels or ()) - set(self._groups))
        if unknown:
            raise ValueError(f"Program {self._name!r} has no group {', '.join(unknown)}; its "
                             f"groups: {', '.join(self._groups)}")
        return {(node.label, node.index) for label in (labels or self._groups)
                for node in self._groups[label]}

    def to_dot(self, *, collapse_at: int | None = 3, legend: bool = True) -> str:
        """The program's picture as Graphviz DOT source: groups as clusters, nodes shaped by
        type, an edge from each node to every node whose handle it holds, colocations nested,
        and `collapse_at` or more identical nodes of a group drawn as one (launchpad/dot.py
        says what the picture shows). `lp.render_program` draws it as SVG or PNG."""
        return dot.to_dot(self, collapse_at=collapse_at, legend=legend)

    def __repr__(self) -> str:
        sizes = ", ".join(f"{label}: {len(nodes)}" for label, nodes in self._groups.items())
        return f"Program({self._name!r}, {{{sizes}}})"


def _set_policy(policies: dict, label: str, policy: Any, kind: type, what: str) -> None:
    """Sets (None: removes) group `label`'s policy in `policies`, if it is a `kind`."""
    if policy is None:
        policies.pop(label, None)
    elif not isinstance(policy, kind):
        raise TypeError(f"{what} policy of group {label!r} must be an lp.{kind.__name__}, "
                        f"got {policy!r}")
    else:
        policies[label] = policy


def make_program(*nodes: GraphNode, name: str = "launchpad") -> Program:
    """Builds a program from nodes, each in a group named after what it runs."""
    program = Program(name)
    for node in nodes:
        program.add_node(node, label=node.default_label())
    return program
