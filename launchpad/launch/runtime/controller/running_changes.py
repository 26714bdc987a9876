"""What a running program's controller changes of it: `scale`, `plan` and `apply`, and the
futures its nodes and group handles wait on for such changes (the Controller's, as a base
class: group_scaling.py and program_change.py do the work)."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Collection

from launchpad.launch.runtime.controller import program_change
from launchpad.launch.runtime.controller.group_scaling import CHANGEABLE, GroupScaling
from launchpad.launch.runtime.controller.program_change import ProgramPlan
from launchpad.launch.runtime.controller.program_stop import ProgramStop
from launchpad.launch.runtime.controller.registry import AddressRegistry
from launchpad.launch.runtime.run_states import RunStates
from launchpad.program import Program


class RunningChanges:
    """The Controller's changes of its running program (see the module doc)."""

    program: Program
    program_name: str
    launch_type: str
    scaling: GroupScaling
    states: RunStates | None
    _registry: AddressRegistry
    _stop: ProgramStop

    def scale(self, label: str, count: int) -> list[str]:
        """Makes group `label` `count` nodes while the program runs; returns the names of the
        nodes added or removed. New nodes are made as the group's first was (its
        constructor and arguments, so the same handles) and started as its launcher started
        the others; removing stops the highest indices gracefully (their stop events and
        handlers, then the grace period, SIGTERM, SIGKILL).

        Raises:
          ValueError: no such group, a count under 1, or a group that cannot change size.
          NotImplementedError: its launcher cannot start nodes of a running program.
          LaunchError: its launcher found no room for the new nodes (none was started).
          RuntimeError: the program is stopping.
        """
        self._check_running()
        return self.scaling.scale(label, count, self.launch_type)

    def plan(self, program: Program, fingerprints: dict[str, str] | None = None,
             only: Collection[str] | None = None) -> ProgramPlan:
        """What `apply(program)` would do, node by node (program_change.py); changes
        nothing. `fingerprints`: the new program's, where it was built elsewhere; `only`:
        the groups to change (the others run on as they are, however they differ)."""
        return program_change.plan(self.program, self.scaling.fingerprints, program,
                                   fingerprints, only, keeps_states=self.states is not None)

    def apply(self, program: Program, fingerprints: dict[str, str] | None = None,
              only: Collection[str] | None = None) -> ProgramPlan:
        """Changes the running program into `program`, a next version of it: nodes made of
        other code or arguments are replaced (stopped gracefully, their StatePolicy state
        restored in the new ones), new ones added, those it lacks removed; the rest keeps
        running (and, with `only`, the groups it does not name). Returns the plan it
        applied.

        Raises:
          ValueError: a change that cannot be made live (every reason; nothing applied).
          NotImplementedError: its launcher cannot start nodes of a running program.
          RuntimeError: the program is stopping.
        """
        self._check_running()
        if self.scaling.start_nodes is None:
            launcher = self.launch_type or "this launcher"
            raise NotImplementedError(f"A program launched with {launcher} cannot be changed "
                                      f"while it runs ({CHANGEABLE} can)")
        return program_change.apply(self.scaling, self.program, program, fingerprints, only,
                                    self.states)

    def node_stop_future(self, label: str, index: int) -> concurrent.futures.Future:
        """Set when the program starts stopping, or when node label/index's group shrinks
        by it (or it is replaced)."""
        return self.scaling.stop_future(self._registry.check_node(label, index),
                                        self._stop.stop_future())

    def group_size_future(self, label: str, known: int) -> concurrent.futures.Future:
        """Set to group `label`'s size once it is not `known`; -1 once the program stops."""
        return self.scaling.size_future(label, known, self._stop.stop_future())

    def _check_running(self) -> None:
        if self._stop.stop_future().done():
            raise RuntimeError(f"Program {self.program_name!r} is stopping: it no longer "
                               "changes")
