"""Replay: actors write trajectories into a ReverbNode; a learner reads them as a dataset.

Each `actor` node (a PyNode) plays NUM_TRAJECTORIES short episodes of a made-up environment
and writes each as one item with `replay.trajectory_writer` (the writer Acme's adders use).
The `learner` node reads the items back through `reverb.TrajectoryDataset`, in batches, checks
that every trajectory is intact (its steps count up), prints what it read and stops the
program. The table is a queue, so each trajectory is read exactly once and the learner ends
when it has read them all. Only the replay node and the learner import TensorFlow; an actor
imports Reverb's client when it first writes.

    python -m examples.replay.launch --lp_launch_type=local_mp --num_actors=2
"""

from __future__ import annotations

import numpy as np
from absl import app, flags

import launchpad as lp

_NUM_ACTORS = flags.DEFINE_integer("num_actors", 2, "How many actor nodes.", lower_bound=1)
_NUM_TRAJECTORIES = flags.DEFINE_integer(
    "num_trajectories", 8, "Trajectories each actor writes.", lower_bound=1)

TABLE = "trajectories"
STEPS = 5  # steps per trajectory
OBS_DIM = 8
BATCH = 4


def make_tables():
    """The replay node's tables (called in its process, where TF and Reverb are imported)."""
    import reverb
    import tensorflow as tf
    signature = {"observation": tf.TensorSpec([STEPS, OBS_DIM], tf.float32),
                 "step": tf.TensorSpec([STEPS], tf.int32)}
    return [reverb.Table.queue(TABLE, max_size=10_000, signature=signature)]


def act(replay, actor_id: int, num_trajectories: int) -> None:
    """An actor: episodes of a made-up environment, each written as one trajectory."""
    rng = np.random.default_rng(actor_id)
    with replay.trajectory_writer(num_keep_alive_refs=STEPS) as writer:
        for _ in range(num_trajectories):
            for step in range(STEPS):
                writer.append({"observation": rng.normal(size=OBS_DIM).astype(np.float32),
                               "step": np.int32(step)})
            writer.create_item(TABLE, priority=1.0, trajectory={
                "observation": writer.history["observation"][-STEPS:],
                "step": writer.history["step"][-STEPS:]})
        writer.flush()
    print(f"actor {actor_id}: wrote {num_trajectories} trajectories of {STEPS} steps",
          flush=True)


class Learner:
    """Reads every trajectory the actors write, in batches, then stops the program."""

    def __init__(self, replay, total: int):
        self._replay = replay
        self._total = total

    def run(self) -> None:
        import reverb
        dataset = reverb.TrajectoryDataset.from_table_signature(
            server_address=self._replay.server_address, table=TABLE,
            max_in_flight_samples_per_worker=2 * BATCH)
        read = batches = 0
        for sample in dataset.batch(BATCH, drop_remainder=False):
            steps = sample.data["step"].numpy()
            assert (steps == np.arange(STEPS)).all(), "a trajectory arrived out of order"
            read += len(steps)
            batches += 1
            if read >= self._total:
                break
        print(f"learner: read {read} trajectories in {batches} batches, every one intact",
              flush=True)
        lp.stop()


def make_program(num_actors: int, num_trajectories: int) -> lp.Program:
    program = lp.Program("replay")
    replay = program.add_node(lp.ReverbNode(make_tables), label="replay")
    with program.group("actor"):
        for i in range(num_actors):
            program.add_node(lp.PyNode(act, replay, i, num_trajectories))
    program.add_node(lp.CourierNode(Learner, replay, num_actors * num_trajectories),
                     label="learner")
    return program


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    controller = lp.launch(make_program(_NUM_ACTORS.value, _NUM_TRAJECTORIES.value))
    controller.wait()
    print("Program stopped cleanly.", flush=True)


if __name__ == "__main__":
    app.run(main)
