"""`Cluster`: the TensorFlow cluster a replicator runs on, and this process's place in it.

Plain data (no TensorFlow here): the addresses of the cluster's tasks by job - "worker" for
synchronous training, plus "chief" and "ps" for asynchronous training with parameter servers -
and which task this process is. `ReplicatedNode` builds it from the addresses its tasks
registered with the program's controller; a script can build it by hand. It turns into a
TF_CONFIG value or a cluster resolver, so no process-wide environment variable is needed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

SYNC = "sync"
ASYNC = "async"
MODES = (SYNC, ASYNC)


@dataclasses.dataclass(frozen=True)
class Cluster:
    """Task addresses by job ("chief", "worker", "ps") and the task this process is.

    Synchronous training has only "worker" tasks (worker 0 is the chief); asynchronous
    training has one "chief" (the coordinator that runs the training loop), the "worker"s that
    run the steps it schedules, and the "ps" tasks that hold the variables.
    """

    jobs: Mapping[str, Sequence[str]]
    task_type: str
    task_index: int

    def __post_init__(self):
        unknown = sorted(set(self.jobs) - {"chief", "worker", "ps"})
        if unknown:
            raise ValueError(f"Unknown job(s) {unknown} in cluster; jobs are chief, worker, ps")
        if not self.jobs.get("worker"):
            raise ValueError("A cluster needs at least one worker task")
        tasks = self.jobs.get(self.task_type, ())
        if not 0 <= self.task_index < len(tasks):
            raise ValueError(f"Task {self.task_type}:{self.task_index} is not in the cluster "
                             f"{dict(self.jobs)}")

    @property
    def mode(self) -> str:
        """"async" when the cluster has parameter servers, else "sync"."""
        return ASYNC if self.jobs.get("ps") else SYNC

    @property
    def is_chief(self) -> bool:
        """The task that runs the trainer's loop alone or first (async: the coordinator)."""
        if self.mode == ASYNC:
            return self.task_type == "chief"
        return self.task_type == "worker" and self.task_index == 0

    def tf_config(self) -> dict[str, Any]:
        """The TF_CONFIG value of this task."""
        return {"cluster": {job: list(tasks) for job, tasks in self.jobs.items()},
                "task": {"type": self.task_type, "index": self.task_index}}

    def tf_config_json(self) -> str:
        return json.dumps(self.tf_config())

    def cluster_spec(self) -> Any:
        """The `tf.train.ClusterSpec` of the cluster (imports TensorFlow)."""
        import tensorflow as tf
        return tf.train.ClusterSpec({job: list(tasks) for job, tasks in self.jobs.items()})

    def resolver(self) -> Any:
        """A `tf.distribute.cluster_resolver.SimpleClusterResolver` of this task (imports TF)."""
        import tensorflow as tf
        return tf.distribute.cluster_resolver.SimpleClusterResolver(
            self.cluster_spec(), task_type=self.task_type, task_id=self.task_index,
            rpc_layer="grpc")
