"""`lp.SlurmSettings`: how a program's Slurm job is asked for (`lp.launch(..., slurm=...)`).

What each node needs is said once for every engine, with `lp.Resources`; what is Slurm's own -
the partition, account, QoS, time limit, extra `sbatch` arguments, where the run's files go -
is said here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from launchpad.launch.runtime import run_records
from launchpad.launch.slurm import placement as slurm_placement


@dataclasses.dataclass(frozen=True)
class SlurmSettings:
    """Slurm options of a launch.

    Args:
      partition, account, qos: `sbatch --partition/--account/--qos`.
      time_limit: `sbatch --time`: minutes, or Slurm's "D-HH:MM:SS" forms.
      stop_before_end_secs: Slurm signals the nodes this long before the time limit (`sbatch
        --signal=USR1@SECS`; also on preemption where the cluster sets PreemptParameters=
        send_user_signal); the program then stops gracefully (stop handlers run, a
        ReverbNode checkpoints) and `wait()` returns with `controller.stop_reason` saying
        why, not a crash. 0: no warning.
      sbatch_args: more `sbatch` arguments, e.g. ["--constraint=a100", "--exclusive"].
      run_dir: a folder of the filesystem the cluster shares, where the run's folder (node
        specs, logs) is made, private to the user (default ~/.launchpad).
      controller_host: the address nodes reach the controller at (default: this host's
        address on the route to slurmctld).
      components: how groups become components of the job (slurm/placement.py):
        "by_kind" (default) puts every group in one component, packed on as few hosts as
        hold it, unless groups differ in kind (GPUs or not, or a Resources.extra such as a
        partition or constraint): those get a component each; "by_resources" makes a
        component per distinct lp.Resources, a heterogeneous job as Slurm sees it.
      pending_timeout_secs: fail the launch (and cancel the job) if it still pends after
        this long; None waits as long as Slurm keeps it (reasons it never recovers from,
        such as PartitionConfig, fail it at once either way).
      requeue: a detached program whose job is warned of its end (its time limit, or a
        preemption: `stop_before_end_secs`) stops gracefully - its stateful nodes save
        (lp.StatePolicy) - and its job requeues itself (`sbatch --requeue`, `scontrol
        requeue`); run again, it starts from the saved states under the same run id.
      max_nodes: group -> the most nodes it may grow to while it runs (`controller.scale`):
        the job asks Slurm for room for them from the start (each placed as its group's
        nodes are), so that a group grows into hosts the job holds. Without it, a group
        grows only into what the packing left free on its hosts.
    """

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_limit: int | str | None = None
    stop_before_end_secs: int = 60
    sbatch_args: Sequence[str] = ()
    run_dir: str = run_records.DEFAULT_RUN_DIR
    controller_host: str | None = None
    components: str = slurm_placement.BY_KIND
    pending_timeout_secs: float | None = None
    requeue: bool = False
    max_nodes: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if isinstance(self.sbatch_args, str):
            raise TypeError("SlurmSettings.sbatch_args must be a list of arguments, got the "
                            f"string {self.sbatch_args!r}")
        if not isinstance(self.stop_before_end_secs, int) or self.stop_before_end_secs < 0:
            raise ValueError("SlurmSettings.stop_before_end_secs must be an int >= 0, got "
                             f"{self.stop_before_end_secs!r}")
        if self.components not in slurm_placement.COMPONENT_MODES:
            raise ValueError(f"SlurmSettings.components must be one of "
                             f"{slurm_placement.COMPONENT_MODES}, got {self.components!r}")
        timeout = self.pending_timeout_secs
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(
                timeout, (int, float)) or not timeout > 0):
            raise ValueError(f"SlurmSettings.pending_timeout_secs must be a number > 0 or "
                             f"None, got {timeout!r}")
        if self.requeue and not self.stop_before_end_secs:
            raise ValueError("SlurmSettings(requeue=True) needs stop_before_end_secs > 0: the "
                             "warning is what makes the program save before its job ends")
        for group, most in dict(self.max_nodes).items():
            if not isinstance(most, int) or isinstance(most, bool) or most < 1:
                raise ValueError(f"SlurmSettings.max_nodes[{group!r}] must be an int >= 1, "
                                 f"got {most!r}")
        if isinstance(self.time_limit, int) and self.time_limit < 1:
            raise ValueError(f"SlurmSettings.time_limit must be >= 1 minute, got "
                             f"{self.time_limit}")

    def sbatch_options(self) -> list[str]:
        """The job-wide `sbatch` arguments these settings make."""
        options = [f"--{name}={value}" for name, value in (
            ("partition", self.partition), ("account", self.account), ("qos", self.qos),
            ("time", self.time_limit)) if value is not None]
        if self.stop_before_end_secs:
            # To every step (the nodes), not the batch shell, which only holds the job.
            options.append(f"--signal=USR1@{self.stop_before_end_secs}")
        if self.requeue:  # (its output goes on in the same file, run after run)
            options += ["--requeue", "--open-mode=append"]
        return options + list(self.sbatch_args)
