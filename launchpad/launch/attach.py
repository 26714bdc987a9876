"""`lp.attach(run_id)`: the controller of a detached run, from any process of its user.

The run's record (run_records.py) says which cluster launcher made it: a detached Slurm run
(slurm/detached.py) or a detached Ray run (ray/detached.py). A Kubernetes run is found in the
cluster itself, by its launch label, in the namespace given (kubernetes/launcher.py).
"""

from __future__ import annotations

from launchpad.launch.runtime import run_records
from launchpad.launch.runtime.remote import RemoteController


def attach(run_id: str, run_dir: str | None = None, *,
           namespace: str | None = None) -> RemoteController:
    """The controller of detached run `run_id` (`controller.run_id` of its launch): the same
    `wait()`, `stop()`, `kill()`, `exit_codes()` and `restarts()` as the launch returned.

    Args:
      run_id: the run's id.
      run_dir: the `lp.SlurmSettings(run_dir=...)` of a Slurm launch (default ~/.launchpad,
        where Ray runs are recorded too).
      namespace: for a Kubernetes run: its namespace (the run is found in the cluster of
        the kubeconfig, by its launch label).
    Raises:
      LaunchError: there is no such run of this user (the runs there are named), or it is
        not a detached run.
    """
    # Each launcher's module is imported only when one of its runs is attached to.
    if namespace is not None:
        from launchpad.launch.kubernetes import launcher as kubernetes
        return kubernetes.attach(run_id, namespace)
    folder = run_records.find(run_id, run_dir)
    from launchpad.launch.ray import detached as ray_detached
    if ray_detached.is_ray_run(folder):
        return ray_detached.attach(folder)
    from launchpad.launch.slurm import detached as slurm_detached
    return slurm_detached.attach(folder)
