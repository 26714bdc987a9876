"""A Ray launch's placement groups: where each placed group's nodes go, and the room a group
grows into while its program runs.

    at launch        a group given a strategy (RaySettings.placement) gets one placement
                     group, a bundle per node, ready within placement_timeout_secs or the
                     launch fails, naming it
    a group grows    its new nodes take the bundles its removed nodes left, then one new
                     placement group holds the rest (the group's strategy; PACK for a group
                     that reserves resources without one), ready in time or the growth is
                     refused, named, with what the cluster has free; a group that reserves
                     nothing needs no room
    a group shrinks  its removed nodes' bundles are free; a placement group none of whose
                     bundles is held is removed, its resources back to the cluster

Ray's placement groups cannot change size, hence a new one per growth; a new node is never
placed by Ray alone, which would leave an actor pending for ever where nothing fits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from launchpad.launch.ray.settings import RaySettings
from launchpad.launch.runtime.errors import LaunchError
from launchpad.launch.runtime.resources import Resources
from launchpad.program import Program

_GROWTH_STRATEGY = "PACK"


def ray_options(needs: Resources | None) -> dict[str, Any]:
    """An actor's resource options for a node that needs `needs` (None: nothing reserved)."""
    if needs is None:
        return {"num_cpus": 0}
    options: dict[str, Any] = {"num_cpus": needs.cpus, "num_gpus": needs.gpus}
    if needs.memory_mb is not None:
        options["memory"] = needs.memory_mb * 2**20
    if needs.extra:
        options["resources"] = dict(needs.extra)
    return options


def bundle_of(options: dict[str, Any]) -> dict[str, float]:
    """The placement-group bundle of one node with these actor options."""
    names = {"num_cpus": "CPU", "num_gpus": "GPU", "memory": "memory"}
    bundle = {names[k]: v for k, v in options.items() if k in names}
    bundle.update(options.get("resources", {}))
    return {k: v for k, v in bundle.items() if v}


@dataclasses.dataclass
class _Made:
    """One placement group, and which node holds each of its bundles."""

    group: str
    handle: Any
    holders: list[str | None]


class Placements:
    """The placement groups of a launch (see the module doc)."""

    def __init__(self, program: Program, settings: RaySettings, given: dict[str, Resources]):
        unknown = sorted(set(settings.placement) - set(program.groups))
        if unknown:
            raise ValueError(f"RaySettings.placement names groups {unknown} that program "
                             f"{program.name!r} does not have; its groups: "
                             f"{sorted(program.groups)}")
        for group in settings.placement:
            if group not in given:
                raise ValueError(f"RaySettings.placement[{group!r}] needs resources="
                                 f"{{{group!r}: lp.Resources(...)}}: a placement group's "
                                 "bundles must reserve something")
        self._settings = settings
        self._program = program
        self._given = given
        self._made: list[_Made] = []
        self._where: dict[str, tuple[_Made, int]] = {}  # node name -> its bundle

    def make(self) -> None:
        """Makes and awaits each placed group's placement group; on failure removes them and
        raises."""
        try:
            for group, strategy in self._settings.placement.items():
                names = [node.name for node in self._program.groups[group]]
                self._place(group, names, strategy, "")
        except BaseException:
            self.remove()
            raise

    def options(self, name: str) -> dict[str, Any]:
        """The scheduling option of node `name`, if it has a bundle."""
        if name not in self._where:
            return {}
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
        made, index = self._where[name]
        return {"scheduling_strategy": PlacementGroupSchedulingStrategy(
            placement_group=made.handle, placement_group_bundle_index=index)}

    def take(self, group: str, names: Sequence[str]) -> None:
        """Room for new nodes `names` of `group` (see the module doc).

        Raises:
          LaunchError: the cluster has no room for them (none is taken then).
        """
        if not bundle_of(ray_options(self._given.get(group))):
            return
        left = list(names)
        for made in self._made:
            for index, holder in enumerate(made.holders):
                if made.group == group and holder is None and left:
                    made.holders[index] = left[0]
                    self._where[left.pop(0)] = (made, index)
        if left:
            strategy = self._settings.placement.get(group, _GROWTH_STRATEGY)
            try:
                self._place(group, left, strategy, " more")
            except BaseException:
                self.free(names)
                raise

    def free(self, names: Sequence[str]) -> None:
        """Nodes `names` are gone: their bundles are free, and a placement group with none
        held is removed."""
        for name in names:
            if name not in self._where:
                continue
            made, index = self._where.pop(name)
            made.holders[index] = None
            if not any(made.holders):
                self._made.remove(made)
                _remove(made.handle)

    def remove(self) -> None:
        """Removes every placement group (the program has ended)."""
        for made in self._made:
            _remove(made.handle)
        self._made.clear()
        self._where.clear()

    def _place(self, group: str, names: list[str], strategy: str, more: str) -> None:
        """A placement group of a bundle per node of `names`, ready in time, or raises."""
        import ray
        from ray.util import placement_group
        bundle = bundle_of(ray_options(self._given[group]))
        handle = placement_group([bundle] * len(names), strategy=strategy,
                                 name=f"lp-{self._program.name}-{group}-{len(self._made)}")
        made = _Made(group, handle, list(names))
        self._made.append(made)
        for index, name in enumerate(names):
            self._where[name] = (made, index)
        timeout = self._settings.placement_timeout_secs
        try:
            ray.get(handle.ready(), timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            self.free(names)
            free = _described(ray.available_resources())
            raise LaunchError(
                f"The Ray cluster found no room for {len(names)}{more} node"
                f"{'s' * (len(names) != 1)} of group {group!r} of program "
                f"{self._program.name!r} within {timeout:g}s: {len(names)} bundles of "
                f"{bundle}, {strategy} (it has {free or 'nothing'} free)") from None


def _described(resources: dict[str, float]) -> str:
    """What a cluster has free, as a user asks for it: no placement groups' or nodes' own."""
    kept = {k: v for k, v in resources.items() if not k.startswith(("node:", "bundle_group"))
            and "_group_" not in k and k != "object_store_memory"}
    return ", ".join(f"memory={v / 2**30:.1f} GiB" if k == "memory" else f"{k}={v:g}"
                     for k, v in sorted(kept.items()))


def _remove(handle: Any) -> None:
    from ray.util import remove_placement_group
    try:
        remove_placement_group(handle)
    except Exception:  # noqa: BLE001 - Ray removes what a closed connection made
        pass
