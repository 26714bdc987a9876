"""An Acme 0.4.0 distributed agent launched the way Acme's `examples/gym/lp_*.py` launch
theirs, for the acceptance suite (test_acme.py); ours, since Acme's examples are not in its
release, and small enough for a 2-core machine.

    python tests/acme/lp_agent.py --agent=d4pg --lp_launch_type=local_mp   (until Ctrl+C)
    python tests/acme/lp_agent.py --agent=sac --max_steps=3000             (stops by itself)

As in Acme's examples, `main()` builds the program with Acme's own distributed agent class,
launches it with `xm_resources=lp_utils.make_xm_docker_resources(program)` and returns at
once: the program runs until it is stopped (Ctrl+C), or until Acme's StepsLimiter node calls
`lp.stop()` (`--max_steps`).
"""

from __future__ import annotations

import dm_env
import gym
import numpy as np
import sonnet as snt
from absl import app, flags
from acme import specs, wrappers
from acme.agents.jax import sac
from acme.agents.tf import d4pg
from acme.tf import networks
from acme.tf import utils as tf2_utils
from acme.utils import lp_utils

import launchpad as lp

_AGENT = flags.DEFINE_enum("agent", "d4pg", ["d4pg", "sac"], "Which Acme agent to run.")
_TASK = flags.DEFINE_string("task", "MountainCarContinuous-v0", "The Gym task.")
_MAX_STEPS = flags.DEFINE_integer("max_steps", None,
                                  "Actor steps after which Acme's StepsLimiter stops it.")


def make_environment(evaluation: bool = False,
                     task: str = "MountainCarContinuous-v0") -> dm_env.Environment:
    """A Gym task as a dm_env environment, actions clipped to its spec, in float32."""
    del evaluation
    environment = wrappers.GymWrapper(gym.make(task))
    environment = wrappers.CanonicalSpecWrapper(environment, clip=True)
    return wrappers.SinglePrecisionWrapper(environment)


def make_d4pg_networks(action_spec: specs.BoundedArray, hidden: int = 64) -> dict:
    """D4PG's policy and distributional critic, small enough to train on a laptop core."""
    actions = int(np.prod(action_spec.shape, dtype=int))
    policy = snt.Sequential([
        networks.LayerNormMLP([hidden, hidden], activate_final=True),
        networks.NearZeroInitializedLinear(actions),
        networks.TanhToSpec(action_spec),
    ])
    critic = snt.Sequential([
        networks.CriticMultiplexer(),
        networks.LayerNormMLP([hidden, hidden], activate_final=True),
        networks.DiscreteValuedHead(-150.0, 150.0, 51),
    ])
    return {"policy": policy, "critic": critic, "observation": tf2_utils.batch_concat}


def make_program() -> lp.Program:
    task = _TASK.value
    if _AGENT.value == "d4pg":
        return d4pg.DistributedD4PG(
            environment_factory=lp_utils.partial_kwargs(make_environment, task=task),
            network_factory=make_d4pg_networks, num_actors=2, batch_size=64,
            min_replay_size=500, max_actor_steps=_MAX_STEPS.value).build()
    config = sac.SACConfig(min_replay_size=500, batch_size=64, samples_per_insert=32.0,
                           num_sgd_steps_per_step=1)
    return sac.DistributedSAC(
        environment_factory=lambda is_eval: make_environment(is_eval, task),
        network_factory=sac.make_networks, config=config, num_actors=2, seed=1,
        max_number_of_steps=_MAX_STEPS.value).build()


def main(_):
    program = make_program()
    lp.launch(program, xm_resources=lp_utils.make_xm_docker_resources(program))


if __name__ == "__main__":
    app.run(main)
