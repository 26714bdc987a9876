"""The D4PG agent's settings: one dataclass, checked before anything launches.

Every field is a flag of launch.py of the same name; `check()` names the flag at fault, so a
bad value stops the script with a clear message instead of failing inside a node process
minutes later.
"""

from __future__ import annotations

import dataclasses

ENVIRONMENT = "Pendulum-v1"


def _field(default, help_text: str):
    """A setting with its flag's help text."""
    return dataclasses.field(default=default, metadata={"help": help_text})


@dataclasses.dataclass(frozen=True)
class D4PGConfig:
    """Hyperparameters of D4PG (Barth-Maron et al., 2018) and of the program that runs it."""

    num_actors: int = _field(2, "Actor nodes, each with its own environment.")
    max_actor_steps: int = _field(60_000, "Actor steps (all actors) after which the step "
                                  "limiter stops the program.")
    seed: int = _field(0, "Seed of the networks, the environments and the noise.")
    # Learner.
    batch_size: int = _field(256, "Transitions per learner step (over all replicas).")
    policy_learning_rate: float = _field(1e-3, "Adam's learning rate for the policy.")
    critic_learning_rate: float = _field(1e-3, "Adam's learning rate for the critic.")
    discount: float = _field(0.99, "Discount per environment step.")
    n_step: int = _field(5, "N of the N-step returns the actors write.")
    target_update_period: int = _field(100, "Learner steps between copies of the online "
                                       "networks into the target networks.")
    clip_grad_norm: float = _field(40.0, "Gradients are clipped to this global norm.")
    hidden_sizes: tuple[int, ...] = _field((256, 256), "Hidden layer widths of both networks.")
    # The critic's categorical distribution: num_atoms atoms evenly over [v_min, v_max], in
    # units of scaled reward (Pendulum pays -16.3 to 0 per step; times reward_scale 0.1 and
    # summed with discount 0.99, returns lie in [-163, 0]).
    num_atoms: int = _field(51, "Atoms of the critic's value distribution.")
    v_min: float = _field(-150.0, "The lowest atom (in scaled reward).")
    v_max: float = _field(0.0, "The highest atom (in scaled reward).")
    reward_scale: float = _field(0.1, "Rewards are multiplied by this before learning.")
    # Replay.
    replay_size: int = _field(200_000, "Transitions the replay table holds (FIFO).")
    min_replay_size: int = _field(1_000, "Transitions in replay before the learner starts.")
    samples_per_insert: float = _field(128.0, "Sampled transitions per inserted one, kept by "
                                       "the table's rate limiter (0: no limit).")
    # Actors and evaluator.
    sigma: float = _field(0.3, "Std of the actors' Gaussian exploration noise (the action "
                          "range is [-1, 1]).")
    variable_update_period: int = _field(200, "Actor steps between pulls of the policy.")
    eval_episodes: int = _field(5, "Episodes per evaluation.")
    eval_every_secs: float = _field(10.0, "Seconds between evaluations.")
    devices: int = _field(1, "Learner replicas in its process (logical CPU devices where "
                          "there are no GPUs).")
    num_workers: int = _field(1, "Learner worker processes (sync all-reduce between them).")
    max_restarts: int = _field(3, "Times a failed actor or evaluator (they keep no state) is "
                               "restarted before its failure stops the program.")

    def check(self) -> None:
        """Raises ValueError naming the first flag whose value cannot work."""
        positive = ("num_actors", "max_actor_steps", "batch_size", "policy_learning_rate",
                    "critic_learning_rate", "n_step", "target_update_period",
                    "clip_grad_norm", "replay_size", "min_replay_size", "reward_scale",
                    "variable_update_period", "eval_episodes", "eval_every_secs", "devices",
                    "num_workers")
        for name in positive:
            if not getattr(self, name) > 0:
                _refuse(name, getattr(self, name), "must be positive")
        if not 0.0 < self.discount <= 1.0:
            _refuse("discount", self.discount, "must be in (0, 1]")
        if self.num_atoms < 2:
            _refuse("num_atoms", self.num_atoms, "must be at least 2")
        if not self.v_min < self.v_max:
            _refuse("v_min", self.v_min, f"must be below --v_max={self.v_max}")
        if self.max_restarts < 0:
            _refuse("max_restarts", self.max_restarts, "must be >= 0")
        if self.sigma < 0:
            _refuse("sigma", self.sigma, "must be >= 0")
        if self.samples_per_insert < 0:
            _refuse("samples_per_insert", self.samples_per_insert, "must be >= 0")
        if self.min_replay_size > self.replay_size:
            _refuse("min_replay_size", self.min_replay_size,
                    f"exceeds --replay_size={self.replay_size}")
        if self.batch_size % (self.devices * self.num_workers):
            _refuse("batch_size", self.batch_size,
                    f"must divide evenly over the {self.devices * self.num_workers} learner "
                    "replicas (--devices x --num_workers)")
        if not self.hidden_sizes or min(self.hidden_sizes) < 1:
            _refuse("hidden_sizes", self.hidden_sizes, "must be positive layer widths")


def _refuse(flag: str, value: object, why: str) -> None:
    raise ValueError(f"--{flag}={value} {why}")
