"""A run's states (lp.StatePolicy): which groups keep state, where, and the run resumed.

    <run folder>/state/                   the run's state folder (a group's `dir` aside)
    <run's state folder>/program.json     the program's groups, for a later resume=
    <run's state folder>/<label>.<index>/ each node's states (state_store.py)

`prepare` makes the folder and checks a resumed run's groups against the program's before
any node starts; the controller gives each node its `StateSpec`, by its group's policy as the
running program has it now (a group `apply` adds may keep state too: `record_groups` then
writes the program's groups again).
"""

from __future__ import annotations

import dataclasses
import json
import os

from launchpad.launch.runtime import private_files, run_records
from launchpad.launch.runtime.errors import StateError
from launchpad.launch.runtime.state_store import StateSpec
from launchpad.program import Program, StatePolicy

_STATE_FOLDER = "state"  # in a run's folder
_PROGRAM_FILE = "program.json"


@dataclasses.dataclass(frozen=True)
class RunStates:
    """Where a run's states go (`prepare` makes it; the launch gives it to the controller,
    which gives each node of a stateful group its `spec_for` that group's policy)."""

    run_id: str
    folder: str  # this run's state folder, for the groups that name no `dir`
    resumed: str | None = None  # the run resumed, if any
    resumed_folder: str | None = None

    def spec_for(self, policy: StatePolicy | None) -> StateSpec | None:
        """What a node of a group with `policy` saves and restores (None: no policy, no
        state)."""
        if policy is None:
            return None
        if policy.dir is None:
            return StateSpec(self.folder, self.resumed_folder, policy.every_secs, policy.keep)
        resumed = os.path.join(policy.dir, self.resumed) if self.resumed else None
        return StateSpec(os.path.join(policy.dir, self.run_id), resumed, policy.every_secs,
                         policy.keep)


def prepare(program: Program, run_id: str, folder: str, resume: str | None = None,
            resume_partial: bool = False, run_dir: str | None = None) -> RunStates | None:
    """The states of a run of `program` (None if no group keeps any): its folder made, the
    program's groups written there (for a later resume=), and the run resumed checked.

    Args:
      program: the program launched.
      run_id: the run's id.
      folder: where this run's states go (its run folder's `state`).
      resume: a run of this user whose states the nodes start from (`resume=`).
      resume_partial: start from those states even where the programs' groups differ.
      run_dir: where the run resumed is recorded (lp.SlurmSettings(run_dir=...); default
        ~/.launchpad, or $LAUNCHPAD_RUN_DIR).
    Raises:
      StateError: the run resumed is not this program (its groups differ, named), or kept
        no states; LaunchError: there is no such run.
    """
    if not check_stateful(program, resume):
        return None
    resumed_folder = (None if resume is None
                      else os.path.join(run_records.find(resume, run_dir), _STATE_FOLDER))
    return prepare_at(program, run_id, folder, resume, resumed_folder, resume_partial)


def check_stateful(program: Program, resume: str | None) -> bool:
    """Whether a group of `program` keeps state.

    Raises:
      StateError: none does, and `resume` asks for a resume.
    """
    if not program.state_policies and resume is not None:
        raise StateError(f"resume={resume!r}: no group of program {program.name!r} keeps "
                         "state (give it lp.StatePolicy: program.group(..., state=...))")
    return bool(program.state_policies)


def prepare_at(program: Program, run_id: str, folder: str, resume: str | None,
               resumed_folder: str | None, resume_partial: bool) -> RunStates:
    """`prepare` of a stateful program, the state folder of the run resumed given (a
    Kubernetes launch's is on its state volume, not in a run folder of this host)."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    private_files.check_private_dir(folder)
    groups = record_groups(folder, program)
    if resume is not None:
        _check_resumed(program.name, groups, resume, resumed_folder, resume_partial)
    return RunStates(run_id, folder, resume, resumed_folder)


def record_groups(folder: str, program: Program) -> dict[str, list[str]]:
    """Writes `program`'s groups in the run's state folder `folder` (what a later resume=
    is checked against); returns them."""
    groups = _groups_of(program)
    private_files.write_private(os.path.join(folder, _PROGRAM_FILE),
                                json.dumps(groups, indent=1).encode())
    return groups


def state_folder(run_folder: str) -> str:
    """Where the states of the run recorded in `run_folder` are."""
    return os.path.join(run_folder, _STATE_FOLDER)


def _groups_of(program: Program) -> dict[str, list[str]]:
    """Each group's node kinds, in order: what must match for a resume."""
    return {label: [node.kind() for node in nodes] for label, nodes in program.groups.items()}


def _check_resumed(name: str, groups: dict, resume: str, folder: str, partial: bool) -> None:
    try:
        private_files.check_private_dir(folder)
        saved = json.loads(private_files.read_private(os.path.join(folder, _PROGRAM_FILE)))
    except FileNotFoundError:
        raise StateError(f"resume={resume!r}: that run kept no states (its program had no "
                         "lp.StatePolicy, or it was not a run of this launcher)") from None
    differ = sorted(label for label in set(groups) | set(saved)
                    if groups.get(label) != saved.get(label))
    if differ and not partial:
        raise StateError(
            f"resume={resume!r}: program {name!r} differs from the run's in groups "
            f"{', '.join(differ)} (their nodes, or their kinds); pass resume_partial=True to "
            "start the nodes that match from their states anyway")
