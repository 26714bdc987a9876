"""Where the stateful nodes of a Kubernetes launch keep their states: its state volume.

The pods of a group that keeps state (lp.StatePolicy) mount the PersistentVolumeClaim of
`lp.KubernetesSettings(state_volume=...)` at STATE_MOUNT, and each node keeps its states in
`<StatePolicy.dir, else STATE_MOUNT>/<launch id>/<label>.<index>/`: a pod its Job runs again
starts from its latest.

The controller's pod mounts it too. Before it serves anything it does what a local launch does
on its own host (run_states.prepare): it writes the program's groups beside the launch's
states, for a later resume, and with `resume=RUN_ID` (an earlier launch's id, its
`launchpad.dev/launch` label) it checks that launch's groups against them. A program whose
groups differ is refused, named, unless `resume_partial=True`, and then no node starts. Each
node of a resumed launch that has no state of its own yet starts from its latest of RUN_ID.
"""

from __future__ import annotations

import os
import re

from launchpad.launch.kubernetes.settings import KubernetesSettings
from launchpad.launch.runtime import run_states, state_store
from launchpad.program import Program

STATE_MOUNT = "/var/run/launchpad/state"  # the state volume, in the pods that keep state
_LAUNCH_ID = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")  # as manifests make them


def check(program: Program, settings: KubernetesSettings, resume: str | None) -> bool:
    """Whether the launch keeps state (its controller's pod then mounts the volume too).

    Raises:
      ValueError: a group keeps state and the settings name no state volume, or `resume`
        is not a launch's id.
      StateError: `resume` is given, and no group keeps state.
    """
    if resume is not None and not (isinstance(resume, str) and _LAUNCH_ID.match(resume)):
        raise ValueError(f"resume={resume!r} is not the id of a Kubernetes launch (its "
                         "launchpad.dev/launch label, e.g. 'learner-3fa2c1')")
    if not run_states.check_stateful(program, resume):
        return False
    if settings.state_volume is None:
        labels = sorted(program.state_policies)
        groups = (f"Group {labels[0]!r} keeps" if len(labels) == 1
                  else f"Groups {', '.join(map(repr, labels))} keep")
        raise ValueError(f"{groups} state (lp.StatePolicy): give lp.KubernetesSettings("
                         "state_volume=CLAIM), a PersistentVolumeClaim their pods mount for "
                         "their states")
    return True


def node_spec(program: Program, label: str, launch_id: str,
              resume: str | None) -> state_store.StateSpec | None:
    """Where the nodes of group `label` keep their states (None: the group keeps none), and
    those of the launch resumed."""
    policy = program.state_policies.get(label)
    if policy is None:
        return None
    base = policy.dir or STATE_MOUNT
    return state_store.StateSpec(os.path.join(base, launch_id),
                                 None if resume is None else os.path.join(base, resume),
                                 policy.every_secs, policy.keep)


def prepare(program: Program, launch_id: str, resume: str | None,
            resume_partial: bool) -> run_states.RunStates | None:
    """In the controller's pod, before it serves: the program's groups written on the state
    volume, and the launch resumed checked (see the module doc); the launch's states (None:
    no group keeps state, and the pod has no state volume).

    Raises:
      StateError: the launch resumed kept no states, or its groups differ (named).
    """
    if not run_states.check_stateful(program, resume):
        return None
    return run_states.prepare_at(program, launch_id, os.path.join(STATE_MOUNT, launch_id),
                                 resume, None if resume is None
                                 else os.path.join(STATE_MOUNT, resume), resume_partial)
