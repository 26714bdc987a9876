"""Agent: a distributed Q-learning agent, the shape of an Acme agent as a Launchpad program.

    actor x N --trajectory_writer--> replay (ReverbNode) --TrajectoryDataset--> learner
        ^                                                                        |
        +------------- get_variables() ---- cacher (CacherNode) <----------------+

Actors play a corridor (`parts.Chain`: walk right to the goal) with an epsilon-greedy policy
on the learner's latest variables, which they read from a CacherNode rather than from the
learner itself, and write each transition into a Reverb table. The learner (a CourierNode)
trains a Q-function on batches sampled from the table with TensorFlow, through a
`launchpad.replicator.Replicator`, and serves its variables. After `--num_steps` it checks
that its greedy policy walks straight to the goal, prints so and stops the program; the
actors print how many of their episodes reached the goal. This is what `make demo` runs.

    python -m examples.agent.launch --lp_launch_type=local_mp --num_actors=2
"""

from __future__ import annotations

from absl import app, flags

import launchpad as lp
from examples.agent.parts import TABLE, Actor, Learner

_NUM_ACTORS = flags.DEFINE_integer("num_actors", 2, "Actor nodes.", lower_bound=1)
_NUM_STEPS = flags.DEFINE_integer("num_steps", 300, "Learner steps.", lower_bound=1)
_LENGTH = flags.DEFINE_integer("length", 8, "Cells of the corridor.", lower_bound=2)
_EPSILON = flags.DEFINE_float("epsilon", 0.3, "Actors' exploration rate.")


def make_tables(length: int):
    """The replay node's table (called in its process): one transition per item."""
    import reverb
    import tensorflow as tf
    signature = {"observation": tf.TensorSpec([length], tf.float32),
                 "action": tf.TensorSpec([], tf.int32),
                 "reward": tf.TensorSpec([], tf.float32),
                 "discount": tf.TensorSpec([], tf.float32),
                 "next_observation": tf.TensorSpec([length], tf.float32)}
    return [reverb.Table(TABLE, sampler=reverb.selectors.Uniform(),
                         remover=reverb.selectors.Fifo(), max_size=10_000,
                         rate_limiter=reverb.rate_limiters.MinSize(100), signature=signature)]


def make_program(num_actors: int = 2, num_steps: int = 300, length: int = 8,
                 epsilon: float = 0.3) -> lp.Program:
    program = lp.Program("agent")
    replay = program.add_node(lp.ReverbNode(lambda: make_tables(length)), label="replay")
    learner = program.add_node(lp.CourierNode(Learner, replay, length, num_steps),
                               label="learner")
    cacher = program.add_node(lp.CacherNode(learner, refresh_interval_ms=100,
                                            stale_after_ms=30_000), label="cacher")
    with program.group("actor"):
        for i in range(num_actors):
            program.add_node(lp.CourierNode(Actor, replay, cacher, i, length, epsilon))
    return program


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    controller = lp.launch(make_program(_NUM_ACTORS.value, _NUM_STEPS.value, _LENGTH.value,
                                        _EPSILON.value))
    controller.wait()
    print("Program stopped cleanly.", flush=True)


if __name__ == "__main__":
    app.run(main)
