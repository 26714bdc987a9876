"""`GroupHandle`: one handle for a group of nodes; in a node it becomes a `GroupClient`.

    with program.group("actor"):
        actors = [program.add_node(lp.CourierNode(Actor)) for _ in range(64)]
    learner = lp.CourierNode(Learner, actors=program.group_handle("actor"))
    # or lp.GroupHandle(actors), over any list of handles of CourierNodes

In the learner's process, `actors` is a courier GroupClient (courier/group.py):
`actors.call.update(weights)`, `actors.broadcast.update(weights)`, `actors.choose.act(obs)`,
`actors.scatter.evaluate(seeds)`, `actors[3]`, `actors[0:8]`, `len(actors)`. Like any handle,
a group handle may sit anywhere in a node's arguments (lists, dicts, dataclasses, ...); a
program's picture draws it as one edge to the group.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from launchpad import context, courier
from launchpad.nodes.dereference import Dereferenceable
from launchpad.nodes.handles import Handle


class GroupHandle(Dereferenceable):
    """A handle of every node of a group, in order (see the module doc).

    Args:
      handles: the members' handles (each a CourierNode's, whose client makes calls).
      follows: the label of the group these handles are the whole of (`program.group_handle`
        gives it): its client then follows the group as it grows and shrinks while the
        program runs (`controller.scale`).
    Raises:
      TypeError: `handles` is empty, or holds something other than handles.
    """

    def __init__(self, handles: Sequence[Handle], follows: str | None = None):
        handles = list(handles)
        if not handles or not all(isinstance(h, Handle) for h in handles):
            raise TypeError(f"lp.GroupHandle needs a list of one or more node handles (those "
                            f"program.add_node returns), got {handles!r}")
        self._handles = handles
        self._follows = follows

    @property
    def follows(self) -> str | None:
        """The label of the group it follows as it grows and shrinks, or None (its members
        are those it was given)."""
        return self._follows

    @property
    def members(self) -> list[Handle]:
        """The members' handles, in order."""
        return list(self._handles)

    def inner_placeholders(self) -> list[Dereferenceable]:
        return list(self._handles)

    def group_label(self) -> str | None:
        """The label of the group whose every node this handle holds, in order, or None (a
        program's picture draws the first as one edge to the group)."""
        nodes = [handle._node for handle in self._handles]
        if any(node is None or not node.is_added() for node in nodes):
            return None
        group = nodes[0].program.groups.get(nodes[0].label, [])
        whole = len(group) == len(nodes) and all(a is b for a, b in zip(nodes, group, strict=True))
        return nodes[0].label if whole else None

    def __len__(self) -> int:
        return len(self._handles)

    def __getitem__(self, index: int | slice) -> Handle | GroupHandle:
        """A member's handle, or a handle of a slice of the group."""
        if isinstance(index, slice):
            return GroupHandle(self._handles[index])
        return self._handles[index]

    def dereference(self) -> courier.GroupClient:
        clients = [handle.dereference() for handle in self._handles]
        for handle, client in zip(self._handles, clients, strict=True):
            if not isinstance(client, courier.Client):
                raise TypeError(f"Member {handle.node_name} of a group handle gives "
                                f"{type(client).__name__}, not a courier client: group calls "
                                "need CourierNodes")
        group = courier.GroupClient(clients, [handle.node_name for handle in self._handles])
        node_context = context.current_or_none()
        if node_context is not None:  # its broadcast failures are in the node's telemetry
            node_context.groups.add(group)
            if self._follows and node_context.controller_address:
                threading.Thread(target=_follow, args=(group, self._handles[0], node_context),
                                 name=f"lp-group-{self._follows}", daemon=True).start()
        return group

    def __repr__(self) -> str:
        names = [handle.node_name for handle in self._handles[:3]]
        more = f", ... ({len(self)} members)" if len(self) > 3 else ""
        return f"<GroupHandle {', '.join(names)}{more}>"


def _follow(group: courier.GroupClient, first: Handle,
            node_context: context.NodeContext) -> None:
    """Keeps `group` the members its group has, as the controller says it changes, until
    the program stops (or its controller is gone)."""
    label = first._label
    known = len(group)
    while True:
        try:
            size = node_context.controller.wait_group_change(label, known)
        except Exception:  # noqa: BLE001 - the controller is gone: the program has ended
            return
        if size < 0:
            return
        have = dict(zip(group.names, (group[i] for i in range(len(group))), strict=True))
        names = [f"{label}/{index}" for index in range(size)]
        group.change_members([have.get(name) or first.sibling(index).dereference()
                              for index, name in enumerate(names)], names)
        known = size
