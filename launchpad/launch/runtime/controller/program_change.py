"""A running program changed into another: `Controller.plan(program)` and `.apply(program)`.

    plan:   the running program and the new one, node by node (group and index):
              + added      in the new one only: a group's new last nodes, or a new group
              - removed    in the running one only: a group's last nodes
              ~ replaced   in both, made of other code or arguments (nodes/fingerprint.py)
                unchanged  in both, made of the same: it keeps running, and its connections
            (with `only`, the groups left out run on as they are: kept), and what cannot be
            done live, each with its reason (refused): a node whose type
            changed, a group that would vanish, a replicated node's tasks, a removed node
            whose handle a node that stays still holds, another program's name, a new group
            that keeps state in a run that keeps none (its state folder is made at launch)
    apply:  nothing if anything is refused (ValueError with every reason); else removed
            nodes stop (the group handles that follow them let them go first), replaced ones
            stop gracefully - a StatePolicy saves their state - and their new nodes start in
            their place and restore it, then added ones start (group_scaling.py does each),
            a new group with its policies; the run's state folder records the groups anew

The new program's fingerprints are computed where it was built, with its code (the command
line's `launchpad apply` sends them with it); the running one's here, from the objects it
launched.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Collection

from launchpad.launch.runtime import run_states
from launchpad.launch.runtime.controller.group_scaling import GroupScaling
from launchpad.launch.runtime.run_states import RunStates
from launchpad.nodes.base import handles_in
from launchpad.nodes.fingerprint import fingerprints
from launchpad.program import Program


@dataclasses.dataclass(frozen=True)
class ProgramPlan:
    """What applying a program to a running one does (see the module doc): node names."""

    program: str
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()  # differ, but of groups left out (`only`): they run on as they are
    refused: tuple[str, ...] = ()  # why it cannot be applied live, one reason each
    applied_at: float | None = None  # time.time() once applied

    @property
    def changes(self) -> bool:
        return bool(self.added or self.removed or self.replaced)

    def __str__(self) -> str:
        lines = [f"Program {self.program!r}: {len(self.added)} to add, {len(self.replaced)} "
                 f"to replace, {len(self.removed)} to remove, {len(self.unchanged)} unchanged"
                 + (f", {len(self.kept)} left as they run" if self.kept else "")]
        for mark, names in (("+", self.added), ("~", self.replaced), ("-", self.removed)):
            lines += [f"  {mark} {name}" for name in names]
        lines += [f"  = {name} (differs; its group is not among those applied)"
                  for name in self.kept]
        lines += [f"  ! {reason}" for reason in self.refused]
        return "\n".join(lines)


def plan(running: Program, running_fingerprints: dict[str, str], new: Program,
         new_fingerprints: dict[str, str] | None = None,
         only: Collection[str] | None = None, keeps_states: bool = False) -> ProgramPlan:
    """What applying `new` to `running` would do (see the module doc); `running_fingerprints`
    are its nodes' as they were launched (or applied). `only`: the groups to change (as
    terraform's -target); the others run on as they are, however they differ.
    `keeps_states`: whether the run has a state folder (a group kept state at launch), where
    a new group may keep state too."""
    new_fingerprints = new_fingerprints or fingerprints(new.get_all_nodes())
    old_fingerprints = running_fingerprints
    old = {node.name: node for node in running.get_all_nodes()}
    made = {node.name: node for node in new.get_all_nodes()}
    refused = []
    if new.name != running.name:
        refused.append(f"the new program is named {new.name!r}, the running one "
                       f"{running.name!r}: apply changes a program into its next version")
    unknown = sorted(set(only or ()) - set(running.groups) - set(new.groups))
    if unknown:
        refused.append(f"only names groups {unknown} that neither program has")
    chosen = set(running.groups) | set(new.groups) if only is None else set(only)
    for label in sorted((set(running.groups) - set(new.groups)) & chosen):
        refused.append(f"group {label!r} would vanish: a running program keeps its groups "
                       "(scale it to 1 node instead)")
    for label in sorted((set(new.groups) - set(running.groups)) & chosen):
        if label in new.state_policies and not keeps_states:
            refused.append(f"group {label!r} is new and keeps state (lp.StatePolicy), and "
                           "this run keeps none: a run's state folder is made at launch, "
                           "for a program with a group that keeps state (launch it with "
                           "the group, or add it without the policy)")
    added = [name for name in made if name not in old]
    removed = [name for name in old if name not in made]
    both = [name for name in old if name in made]
    replaced = [name for name in both if not old_fingerprints[name]
                or old_fingerprints[name] != new_fingerprints.get(name)]
    unchanged = [name for name in both if name not in replaced]
    kept = [name for name in replaced + added + removed
            if name.rpartition("/")[0] not in chosen]
    added, removed, replaced = ([name for name in names if name not in kept]
                                for names in (added, removed, replaced))
    for name in replaced:
        was, becomes = type(old[name]), type(made[name])
        if was is not becomes and (was.__module__, was.__qualname__) != (
                becomes.__module__, becomes.__qualname__):
            refused.append(f"node {name} would change type, from {was.__name__} to "
                           f"{becomes.__name__}: a node keeps its type while its program "
                           "runs")
    for name in added + removed + replaced:
        node = made.get(name) or old[name]
        if node.companion_nodes() or _is_companion(node):
            refused.append(f"node {name} is a replicated node's, whose tasks change only "
                           "with the whole program")
    gone = set(removed)
    for name in unchanged + [name for name in kept if name in old]:  # (those that stay)
        held = sorted({handle.node_name for inner in old[name].all_nodes()
                       for handle in handles_in(inner.arguments())} & gone)
        if held:
            refused.append(f"node {name} stays and holds the handle of {', '.join(held)}, "
                           "which would be removed")
    return ProgramPlan(running.name, tuple(added), tuple(reversed(removed)), tuple(replaced),
                       tuple(unchanged), tuple(kept), tuple(dict.fromkeys(refused)))


def apply(scaling: GroupScaling, running: Program, new: Program,
          new_fingerprints: dict[str, str] | None = None,
          only: Collection[str] | None = None, states: RunStates | None = None) -> ProgramPlan:
    """Changes `running` into `new` (see the module doc; `only` as `plan`'s); returns the
    plan it applied. `states`: the run's, whose folder then records the groups anew.

    Raises:
      ValueError: something of it cannot be applied live (every reason, in the plan's words).
    """
    new_fingerprints = new_fingerprints or fingerprints(new.get_all_nodes())
    with scaling.lock:
        changes = plan(running, scaling.fingerprints, new, new_fingerprints, only,
                       keeps_states=states is not None)
        if changes.refused:
            raise ValueError(f"{changes}\nNothing was applied: the changes marked ! cannot "
                             "be made while the program runs")
        made = {node.name: node for node in new.get_all_nodes()}
        if changes.removed:
            scaling.remove([_unit(name) for name in changes.removed], "(it was removed)")
        for name in changes.replaced:
            scaling.replace(made[name], new_fingerprints[name])
        for label in dict.fromkeys(name.rpartition("/")[0] for name in changes.added):
            if label not in running.groups:
                scaling.adopt_policies(label, new)
            added = [made[name] for name in changes.added if name.rpartition("/")[0] == label]
            scaling.add(label, added, [new_fingerprints[node.name] for node in added])
        if changes.changes and states is not None:
            run_states.record_groups(states.folder, running)
        if changes.changes:
            scaling.record("applied a new version: " + "; ".join(
                f"{mark} {', '.join(names)}" for mark, names in (
                    ("added", changes.added), ("replaced", changes.replaced),
                    ("removed", changes.removed)) if names))
        return dataclasses.replace(changes, applied_at=time.time())


def _unit(name: str) -> tuple[str, int]:
    label, _, index = name.rpartition("/")
    return label, int(index)


def _is_companion(node) -> bool:
    """Whether `node` is a task of a replicated node other than its first."""
    group = node.program.groups.get(node.label, []) if node.program else []
    return bool(group) and any(node in first.companion_nodes() for first in group[:1])
