"""What a `step_fn` run by `Replicator.run` can do across the replicas of its step.

Each function works on the replica context `tf.distribute` gives the step (so inside
`tf.function` too), and with no replicator at all (one replica: the value itself). Values may
be tensors or nested structures of them. In mesh mode the step is one replica that sees the
whole batch, however many devices it spans: each function gives what it gives on one device.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

_REDUCE_OPS = {"sum": tf.distribute.ReduceOp.SUM, "mean": tf.distribute.ReduceOp.MEAN}


def reduce_op(op: str) -> tf.distribute.ReduceOp:
    """The ReduceOp named `op` ("sum" or "mean")."""
    try:
        return _REDUCE_OPS[op]
    except (KeyError, TypeError):
        raise ValueError(f"Unknown reduction {op!r}; use 'sum' or 'mean'") from None


def _replica_context(what: str) -> tf.distribute.ReplicaContext:
    found = tf.distribute.get_replica_context()
    if found is None:
        raise RuntimeError(f"{what}() works inside a step_fn run by Replicator.run (once per "
                           "replica), not in cross-replica code such as the training loop")
    return found


def replica_id() -> tf.Tensor:
    """This replica's index in its step, 0 to num_replicas() - 1 (an int32 tensor; 0 in mesh
    mode, as on one device)."""
    found = _replica_context("replica_id").replica_id_in_sync_group
    return tf.convert_to_tensor(found, dtype=tf.int32)


def num_replicas() -> int:
    """How many replicas run each step (all devices of all synchronous workers; 1 in mesh
    mode, whose one replica spans the mesh, as on one device)."""
    return _replica_context("num_replicas").num_replicas_in_sync


def all_reduce(value: Any, op: str = "sum") -> Any:
    """The sum (or "mean") of `value` over all replicas, on every replica."""
    return _replica_context("all_reduce").all_reduce(reduce_op(op), value)


def all_gather(value: Any, axis: int = 0) -> Any:
    """Every replica's `value`, concatenated along `axis` in replica order, on every replica."""
    return _replica_context("all_gather").all_gather(value, axis)


def broadcast(value: Any, source_replica: int = 0) -> Any:
    """Replica `source_replica`'s `value`, on every replica (for example initial weights or a
    random seed chosen once)."""
    context = _replica_context("broadcast")
    count = context.num_replicas_in_sync
    if not 0 <= source_replica < count:
        raise ValueError(f"source_replica must be in [0, {count}), got {source_replica}")
    is_source = tf.equal(replica_id(), source_replica)
    kept = tf.nest.map_structure(lambda v: tf.where(is_source, v, tf.zeros_like(v)), value)
    return context.all_reduce(tf.distribute.ReduceOp.SUM, kept)
