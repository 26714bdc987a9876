"""A picture of a program: `Program.to_dot()`, its Graphviz DOT source, built as plain text.

What the picture shows:
* each group a cluster, labelled with its label, its number of nodes and its restart policy;
* each node a shape of its type (see the legend: a courier node a rounded box, a Reverb node
  a cylinder, ...), labelled with its name (`label/index`, the node's id in the DOT source)
  and what it runs;
* an edge from each node to every node whose handle its code receives (in its constructor
  arguments, in containers or `lp.Deferred` arguments there, or given later by `configure`):
  who calls whom. Handles of nodes that are not in the program draw nothing. A group handle
  of a whole group (`program.group_handle`) is one edge, ending at the group's border;
* a colocation a cluster of its own inside its group, holding the nodes it runs (nested ones
  nest); an edge to the colocation itself ends at its cluster's border.

Collapsing, so that big groups stay readable: nodes of one group (or of one colocation) with
the same type, the same thing they run, the same callees and the same callers are drawn as
one node `label/0-99 ×100`, once there are at least `collapse_at` of them. Every edge of the
collapsed node stands for the same edge of each of its nodes, so the picture loses nothing
but the count of parallel edges. Colocations are never collapsed.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # program.py imports this module
    from launchpad.program import GraphNode, Program

# node kind -> (shape, style, fill colour); any other kind is drawn as _OTHER.
SHAPES = {
    "PyNode": ("ellipse", "filled", "#fff2cc"),
    "PyClassNode": ("hexagon", "filled", "#ffe6cc"),
    "CourierNode": ("box", "rounded,filled", "#dae8fc"),
    "CacherNode": ("component", "filled", "#e1d5e7"),
    "ReverbNode": ("cylinder", "filled", "#d5e8d4"),
    "ReplicatedNode": ("box3d", "filled", "#f8cecc"),
}
_OTHER = ("octagon", "filled", "#eeeeee")
_COLOCATION_STYLES = {"MultiThreadingColocation": "dashed",
                      "MultiProcessingColocation": "bold,dashed"}


def quote(text: str) -> str:
    """`text` as a DOT quoted string that Graphviz shows as written, line breaks kept (it
    reads backslash escapes and HTML entities such as `&amp;` in labels)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("&", "&amp;")
    return '"' + "\\n".join(escaped.replace("\r\n", "\n").replace("\r", "\n").split("\n")) + '"'


def _attributes(**values: str) -> str:
    return "[" + ", ".join(f"{key}={quote(value)}" for key, value in values.items()) + "]"


def _ranges(indices: list[int]) -> str:
    """`[0, 1, 2, 5]` -> "0-2,5"."""
    parts: list[str] = []
    start = previous = indices[0]
    for index in [*indices[1:], None]:
        if index is not None and index == previous + 1:
            previous = index
            continue
        parts.append(str(start) if start == previous else f"{start}-{previous}")
        if index is not None:
            start = previous = index
    return ",".join(parts)


@dataclasses.dataclass
class _Drawn:
    """One node of the picture: a node of the program, or identical ones collapsed."""

    nodes: list[GraphNode]

    @property
    def id(self) -> str:
        return _name(self.nodes[0])


def _name(node: GraphNode) -> str:
    return f"{node.label}/{node.index}"


class _Picture:
    """The DOT source of one program, built line by line."""

    def __init__(self, program: Program, collapse_at: int | None):
        self._program = program
        self._collapse_at = collapse_at
        self._every: list[GraphNode] = []
        for nodes in program.groups.values():
            for node in nodes:
                self._add_with_inner(node)
        known = {id(node) for node in self._every}
        self._groups_called = {
            id(node): [g for g in node.called_groups() if g in program.groups]
            for node in self._every}
        self._callees = {id(node): [c for c in node.callees() if id(c) in known
                                    and c.label not in self._groups_called[id(node)]]
                         for node in self._every}
        self._callers: dict[int, set[int]] = {id(node): set() for node in self._every}
        for node in self._every:
            for callee in self._callees[id(node)]:
                self._callers[id(callee)].add(id(node))
        self._drawn_as: dict[int, str] = {}  # id(node) -> the id of its node in the picture
        self._kinds: list[str] = []
        self._lines: list[str] = []

    def _add_with_inner(self, node: GraphNode) -> None:
        self._every.append(node)
        for inner in node.inner_nodes():
            self._add_with_inner(inner)

    def _collapsed(self, nodes: list[GraphNode]) -> list[_Drawn | GraphNode]:
        """`nodes` (of one group or colocation) with identical ones collapsed (module doc);
        a colocation stays itself."""
        classes: dict[tuple, _Drawn] = {}
        items: list[_Drawn | GraphNode] = []
        for node in nodes:
            if node.inner_nodes():
                items.append(node)
                continue
            key = (node.kind(), node.runs(), frozenset(id(c) for c in self._callees[id(node)]),
                   frozenset(self._callers[id(node)]))
            if key not in classes:
                classes[key] = _Drawn([])
                items.append(classes[key])
            classes[key].nodes.append(node)
        result: list[_Drawn | GraphNode] = []
        for item in items:
            if isinstance(item, _Drawn) and (
                    self._collapse_at is None or len(item.nodes) < self._collapse_at):
                result.extend(_Drawn([node]) for node in item.nodes)
            else:
                result.append(item)
        return result

    def _emit(self, line: str, depth: int) -> None:
        self._lines.append("  " * depth + line)

    def _emit_nodes(self, nodes: list[GraphNode], depth: int) -> None:
        for item in self._collapsed(nodes):
            if isinstance(item, _Drawn):
                self._emit_drawn(item, depth)
            else:
                self._emit_colocation(item, depth)

    def _emit_drawn(self, drawn: _Drawn, depth: int) -> None:
        first = drawn.nodes[0]
        name = drawn.id
        if len(drawn.nodes) > 1:
            name = (f"{first.label}/{_ranges([node.index for node in drawn.nodes])} "
                    f"×{len(drawn.nodes)}")
        kind = first.kind()
        if kind not in self._kinds:
            self._kinds.append(kind)
        shape, style, colour = SHAPES.get(kind, _OTHER)
        self._emit(f"{quote(drawn.id)} " + _attributes(
            label=f"{name}\n{first.runs() or kind}", shape=shape, style=style,
            fillcolor=colour, tooltip=kind), depth)
        for node in drawn.nodes:
            self._drawn_as[id(node)] = drawn.id

    def _emit_colocation(self, node: GraphNode, depth: int) -> None:
        name = _name(node)
        self._emit(f"subgraph {quote('cluster_node:' + name)} {{", depth)
        self._emit("label=" + quote(f"{name}: {node.kind()}") + "; style="
                   + quote(_COLOCATION_STYLES.get(node.kind(), "dashed")) + ";", depth + 1)
        self._emit_nodes(node.inner_nodes(), depth + 1)
        self._emit("}", depth)
        self._drawn_as[id(node)] = self._drawn_as[id(node.inner_nodes()[0])]

    def _emit_edges(self) -> None:
        drawn: list[tuple[str, str, str]] = []
        for node in self._every:
            for callee in self._callees[id(node)]:
                # An edge to a colocation goes to its first node, clipped at its cluster.
                head = "cluster_node:" + _name(callee) if callee.inner_nodes() else ""
                edge = (self._drawn_as[id(node)], self._drawn_as[id(callee)], head)
                if edge not in drawn:
                    drawn.append(edge)
            for label in self._groups_called[id(node)]:  # to the group's first node, clipped
                first = self._program.groups[label][0]
                edge = (self._drawn_as[id(node)], self._drawn_as[id(first)],
                        "cluster_group:" + label)
                if edge not in drawn:
                    drawn.append(edge)
        for caller, callee, head in drawn:
            attributes = " " + _attributes(lhead=head) if head else ""
            self._emit(f"{quote(caller)} -> {quote(callee)}{attributes};", 1)

    def _emit_legend(self) -> None:
        self._emit(f"subgraph {quote('cluster_legend')} {{", 1)
        self._emit('label="node types"; style="dotted";', 2)
        for kind in self._kinds:
            shape, style, colour = SHAPES.get(kind, _OTHER)
            self._emit(f"{quote('legend:' + kind)} " + _attributes(
                label=kind, shape=shape, style=style, fillcolor=colour), 2)
        self._emit("}", 1)

    def source(self, legend: bool) -> str:
        self._emit(f"digraph {quote(self._program.name)} {{", 0)
        self._emit("label=" + quote(f"program {self._program.name}")
                   + '; labelloc="t"; rankdir="LR"; compound="true"; fontname="Helvetica";', 1)
        self._emit('node [fontname="Helvetica"]; edge [color="#555555"];', 1)
        policies = self._program.restart_policies
        for label, nodes in self._program.groups.items():
            title = f"{label} ({len(nodes)} node{'' if len(nodes) == 1 else 's'})"
            if label in policies:
                title += f"\nrestarts ≤ {policies[label].max_restarts}"
            self._emit(f"subgraph {quote('cluster_group:' + label)} {{", 1)
            self._emit(f'label={quote(title)}; style="rounded";', 2)
            self._emit_nodes(nodes, 2)
            self._emit("}", 1)
        self._emit_edges()
        if legend and self._kinds:
            self._emit_legend()
        self._emit("}", 0)
        return "\n".join(self._lines) + "\n"


def to_dot(program: Program, *, collapse_at: int | None = 3, legend: bool = True) -> str:
    """The DOT source of `program`'s picture (see the module doc).

    Args:
      program: the program to draw.
      collapse_at: the fewest identical nodes drawn as one (None: never collapse).
      legend: add a legend of the node types the picture uses.
    """
    if collapse_at is not None and (not isinstance(collapse_at, int) or collapse_at < 2):
        raise ValueError(f"collapse_at must be an int >= 2 or None, got {collapse_at!r}")
    return _Picture(program, collapse_at).source(legend)
