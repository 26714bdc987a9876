"""`lp.attach(run_id)`: the controller of a detached run, from any process of its user.

The run's record (run_records.py) is found in the run folder, and the launch type whose run
it is attaches to it (each launcher's `detached_runs()`); a run found in its cluster rather
than recorded here is looked up by its launch label, in the namespace given (and
`runs_in(namespace)` lists those running there).
"""

from __future__ import annotations

from launchpad.launch import launchers
from launchpad.launch.runtime import run_records
from launchpad.launch.runtime.controllers import RemoteController
from launchpad.launch.runtime.errors import LaunchError


def attach(run_id: str, run_dir: str | None = None, *,
           namespace: str | None = None) -> RemoteController:
    """The controller of detached run `run_id` (`controller.run_id` of its launch): the same
    `wait()`, `stop()`, `kill()`, `exit_codes()` and `restarts()` as the launch returned.

    Args:
      run_id: the run's id.
      run_dir: the folder of run records the launch was given in its settings (default
        ~/.launchpad).
      namespace: for a run its cluster keeps rather than a run folder: its namespace (the run
        is found in the cluster of the kubeconfig, by its launch label).
    Raises:
      LaunchError: there is no such run of this user (the runs there are named), or it is
        not a detached run.
    """
    folder = None if namespace is not None else run_records.find(run_id, run_dir)
    for launcher in launchers.every():
        runs = launcher.detached_runs()
        controller = runs.attach(run_id, folder, namespace) if runs is not None else None
        if controller is not None:
            return controller
    raise LaunchError(f"Run {run_id!r} is not a detached run: it was launched attached to "
                      "its launching process, which holds its controller")


def runs_in(namespace: str) -> list[run_records.Run]:
    """The runs a cluster keeps in `namespace` that are running (each launcher's
    `runs_in`), oldest first, for `launchpad ls --namespace`.

    Raises:
      LaunchError: the cluster cannot be reached or refuses (named).
    """
    found = []
    for launcher in launchers.every():
        runs = launcher.detached_runs()
        if runs is not None:
            found += runs.runs_in(namespace)
    return sorted(found, key=lambda run: run.started_at)
