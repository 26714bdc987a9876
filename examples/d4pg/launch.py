"""D4PG: a distributed agent for continuous control, as one Launchpad program (`make demo`).

    actor x N --trajectory_writer--> replay (ReverbNode, rate limited) --dataset--> learner
       ^                                                                            |
       +--- get_variables() --- cacher (CacherNode) <--------------------------------+
    evaluator --get_variables()--> cacher          (ReplicatedNode: --devices, --num_workers)
    actors, learner, evaluator --counts--> counter <--reads-- limiter: lp.stop() at the end

The learner trains a distributional critic (categorical, projected onto fixed atoms) and a
deterministic policy on N-step transitions from replay, with target networks; the actors
explore Gaussian-noised policies on their own Pendulum-v1 (gymnasium) and the evaluator plays
the noiseless policy. The launching process shows the counter's progress while it runs, then
draws the learning curve (the evaluator's return) to `<output_dir>/curve.png`.

    python -m examples.d4pg.launch --lp_launch_type=local_mp --num_actors=2
    python -m examples.d4pg.launch --max_actor_steps=100000 --devices=2
    python -m examples.d4pg.launch --lp_launch_type=local_mp --scale_actors=6@20000,2@40000
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import tempfile
import time

from absl import app, flags

import launchpad as lp
from examples.d4pg import counting, progress, scaling
from examples.d4pg.actors import Actor, Evaluator
from examples.d4pg.config import ENVIRONMENT, D4PGConfig
from examples.d4pg.learner import D4PGLearner
from examples.d4pg.replay import Spec, make_tables


def _define_config_flags() -> dict:
    """One flag per D4PGConfig field, of its type, default and help."""
    define = {int: flags.DEFINE_integer, float: flags.DEFINE_float}
    defined = {}
    for field in dataclasses.fields(D4PGConfig):
        help_text = field.metadata["help"]
        if field.type == "tuple[int, ...]":
            defined[field.name] = flags.DEFINE_list(
                field.name, [str(size) for size in field.default], help_text)
        else:
            defined[field.name] = define[{"int": int, "float": float}[field.type]](
                field.name, field.default, help_text)
    return defined


_CONFIG_FLAGS = _define_config_flags()
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Where the learning curve (curve.json, "
                                  "curve.png) goes; default: a new folder under the temp dir.")
_SCALE_ACTORS = flags.DEFINE_list(
    "scale_actors", [], "Scale the actor group while it learns: COUNT@ACTOR_STEPS marks, e.g. "
    "6@20000,2@40000 (6 actors from 20,000 actor steps on, then 2 from 40,000).")
_PROGRESS = flags.DEFINE_enum("progress", "auto", ["auto", "live", "plain", "none"],
                              "How the launching process shows progress: a live table (on "
                              "a terminal, with auto), plain lines, or nothing.")


def config_from_flags() -> D4PGConfig:
    """The flags' D4PGConfig, checked (ValueError names the flag at fault)."""
    values = {}
    for name, holder in _CONFIG_FLAGS.items():
        value = holder.value
        if name == "hidden_sizes":
            try:
                value = tuple(int(size) for size in value)
            except ValueError:
                raise ValueError(f"--hidden_sizes={','.join(value)} must be integers, "
                                 "comma-separated") from None
        values[name] = value
    config = D4PGConfig(**values)
    config.check()
    return config


def environment_spec() -> Spec:
    import gymnasium
    env = gymnasium.make(ENVIRONMENT)
    return Spec(observation_size=env.observation_space.shape[0],
                action_size=env.action_space.shape[0])


def make_program(config: D4PGConfig | None = None, output_dir: str | None = None,
                 **settings) -> lp.Program:
    """The agent as a program; its counter writes the curve into `output_dir` (if given).

    `config` (default: D4PGConfig()) with `settings` replacing its fields, so that
    `launchpad graph examples.d4pg.launch:make_program --arg num_actors=8` draws it."""
    config = dataclasses.replace(config or D4PGConfig(), **settings)
    config.check()
    spec = environment_spec()
    program = lp.Program("d4pg")
    replay = program.add_node(lp.ReverbNode(functools.partial(make_tables, config, spec)),
                              label="replay")
    counter = program.add_node(lp.CourierNode(counting.Counter, output_dir, time.time()),
                               label="counter")
    learner = program.add_node(lp.ReplicatedNode(
        D4PGLearner, replay, counter, config, spec, num_workers=config.num_workers,
        devices=config.devices), label="learner")
    cacher = program.add_node(lp.CacherNode(learner, refresh_interval_ms=500,
                                            stale_after_ms=60_000), label="cacher")
    # Actors and the evaluator keep no state: one that fails is restarted (it pulls the
    # policy again and writes on), up to max_restarts times each.
    restart = lp.RestartPolicy(max_restarts=config.max_restarts) if config.max_restarts else None
    with program.group("actor", restart=restart):
        for _ in range(config.num_actors):
            program.add_node(lp.CourierNode(Actor, replay, cacher, counter, config))
    with program.group("evaluator", restart=restart):
        program.add_node(lp.CourierNode(Evaluator, cacher, counter, config))
    program.add_node(lp.PyNode(counting.stop_after, counter, "actor_steps",
                               config.max_actor_steps, 4 * config.eval_every_secs + 60),
                     label="limiter")
    return program


def read_curve(output_dir: str, name: str = counting.CURVE_FILE) -> list[dict]:
    """The learning curve the counter wrote (or, given its name, its events)."""
    path = os.path.join(output_dir, name)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f)


def run(config: D4PGConfig, output_dir: str, show: str = "auto",
        launch_type: str | None = None,
        schedule: list[tuple[int, int]] = ()) -> lp.Controller:
    """Launches the agent, shows its progress (`show`: auto, live, plain, none) until it
    stops, and returns its controller (ended; `wait()` raises a node's failure). `schedule`:
    (actor steps, actors) marks at which the actor group is scaled (scaling.py)."""
    program = make_program(config, output_dir)
    # A live view and node output cannot share the terminal: nodes' output goes to files
    # under process launchers, unless the user chose where it goes.
    terminal = (None if os.environ.get("LAUNCHPAD_LAUNCH_LOCAL_TERMINAL") or show == "none"
                else "output_to_files")
    launch_type = launch_type or flags.FLAGS.lp_launch_type or "local_mt"
    controller = lp.launch(program, launch_type=launch_type,
                           terminal=terminal if launch_type == "local_mp" else None)
    counter = program.groups["counter"][0].create_handle().dereference()
    if schedule:
        scaling.follow_schedule(controller, counter, schedule, config.num_actors)
    if show != "none":
        progress.follow(controller, counter, config.max_actor_steps,
                        live={"auto": None, "live": True, "plain": False}[show])
    controller.wait()
    return controller


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    try:
        config = config_from_flags()
        schedule = scaling.parse_schedule(_SCALE_ACTORS.value)
    except ValueError as e:
        raise app.UsageError(str(e)) from None
    output_dir = _OUTPUT_DIR.value or tempfile.mkdtemp(prefix="d4pg-")
    os.makedirs(output_dir, exist_ok=True)
    controller = run(config, output_dir, _PROGRESS.value, schedule=schedule)
    from examples.d4pg.plot import draw_curve
    curve = read_curve(output_dir)
    if curve:
        draw_curve(curve, os.path.join(output_dir, "curve.png"),
                   events=read_curve(output_dir, counting.EVENTS_FILE))
        print(f"d4pg: the evaluator's return went from {curve[0]['return']:.0f} to "
              f"{curve[-1]['return']:.0f} in {curve[-1]['actor_steps']:,} actor steps, "
              f"{curve[-1]['learner_steps']:,} learner steps, {curve[-1]['wall_s']:.0f} s",
              flush=True)
    print(f"d4pg: learning curve in {output_dir}/ (curve.json, curve.png)", flush=True)
    if controller.log_dir:
        print(f"d4pg: node logs in {controller.log_dir}/", flush=True)
    print("Program stopped cleanly.", flush=True)


if __name__ == "__main__":
    app.run(main)
