"""Checkpoints of a trainer's state (model, optimizer, step counter) and resuming from the
latest, written the way each replicator mode needs.

* One process (one device, or local devices): it writes to the directory.
* Sync workers (MultiWorkerMirroredStrategy): a save reads every variable, and reading one that
  is synchronised on read (Keras 2's batch-norm statistics) is an all-reduce over the workers,
  so every worker must save, at the same steps. The chief writes to the directory; each other
  worker writes to a scratch directory of its own, deleted as soon as it is written (the way
  tf.distribute's multi-worker guides do it). Every worker restores from the chief's directory.
* Async parameter servers: only the chief (the coordinator) runs the trainer. It waits for the
  steps it scheduled, then saves the variables, reading them from the parameter servers.

A checkpoint is numbered by its step (`ckpt-<step>`). The directory's `checkpoint` file names
the latest; it is replaced (written then renamed) only after the checkpoint's own files are
written, so a run killed while saving leaves the previous checkpoint the latest.
"""

from __future__ import annotations

import os
import tempfile

import tensorflow as tf

MAX_TO_KEEP = 3


class Checkpoints:
    """The checkpoints in `directory` of `trackables` (e.g. model=..., optimizer=...).

    Args:
      replicator: the trainer's replicator: whether it is the chief decides where it writes.
      directory: where the chief's checkpoints are (made if missing).
      trackables: what a checkpoint holds, by name.
    """

    def __init__(self, replicator, directory: str, **trackables):
        self._replicator = replicator
        self._directory = directory
        self._checkpoint = tf.train.Checkpoint(**trackables)
        self._manager = (tf.train.CheckpointManager(self._checkpoint, directory, MAX_TO_KEEP)
                         if replicator.is_chief else None)

    def restore_latest(self) -> str | None:
        """Restores the latest checkpoint of the directory, if any; returns its path."""
        latest = tf.train.latest_checkpoint(self._directory)
        if latest is not None:
            self._checkpoint.restore(latest).assert_existing_objects_matched()
        return latest

    def save(self, step: int) -> str | None:
        """Writes checkpoint `step` once every scheduled step is done; returns its path (None
        on a sync worker that is not the chief: its copy is deleted at once)."""
        self._replicator.join()
        if self._manager is not None:
            return self._manager.save(checkpoint_number=step)
        with tempfile.TemporaryDirectory(prefix="resnet-worker-checkpoint-") as scratch:
            self._checkpoint.write(os.path.join(scratch, f"ckpt-{step}"))
        return None
