"""Does the D4PG example learn? Its learning curve on Pendulum-v1, in wall time on this machine.

    python -m benchmarks.d4pg_pendulum [--max_actor_steps=60000] [--num_actors=2] ...

Runs examples/d4pg as it ships (every flag of examples.d4pg.launch applies) under local_mp,
stopped by its step limiter or, at the latest, after --max_wall_secs (15 minutes: the target
is an evaluator's average return better than -400 within that). Writes the curve (actor
steps, learner steps, wall time, return per evaluation) to <output_dir>/curve.json and draws
it to <output_dir>/curve.png; prints progress lines, then as its last line one JSON object:
final_return (the last evaluation, of the policy as the program stopped), first_return,
best_return, the wall time at which the return first beat -400, wall_s, steps.
With --scale_actors=6@20000,2@40000 the actor group is scaled at those marks while it
learns (examples/d4pg/scaling.py): the changes, each with the learner's restarts then, are
in the JSON's `events` and marked on the picture.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time

from absl import app, flags

import launchpad as lp
from examples.d4pg import counting, progress, scaling
from examples.d4pg import launch as d4pg
from examples.d4pg.plot import draw_curve

TARGET_RETURN = -400.0

_MAX_WALL_SECS = flags.DEFINE_float("max_wall_secs", 900.0, "Stop the program after this long.")


def first_time_beyond(curve: list[dict], target: float) -> float | None:
    """The wall time of the first evaluation better than `target` (None: none was)."""
    return next((row["wall_s"] for row in curve if row["return"] > target), None)


def main(argv: list[str]) -> None:
    del argv
    config = d4pg.config_from_flags()
    schedule = scaling.parse_schedule(flags.FLAGS.scale_actors)
    output_dir = flags.FLAGS.output_dir or tempfile.mkdtemp(prefix="d4pg-pendulum-")
    os.makedirs(output_dir, exist_ok=True)
    started = time.time()
    program = d4pg.make_program(config, output_dir)
    controller = lp.launch(program, launch_type="local_mp", terminal="output_to_files")
    counter = program.groups["counter"][0].create_handle().dereference()
    if schedule:
        scaling.follow_schedule(controller, counter, schedule, config.num_actors)
    deadline = time.monotonic() + _MAX_WALL_SECS.value
    while not controller.wait(timeout=min(30.0, max(0.1, deadline - time.monotonic()))):
        if time.monotonic() >= deadline:
            controller.stop()  # the limit of wall time: stop where it is
            break
        counts = progress.read_counts(counter)
        if counts:
            print(f"d4pg_pendulum: {counts['wall_s']:.0f} s, "
                  f"{counts.get('actor_steps', 0):,.0f} actor steps, "
                  f"{counts.get('learner_steps', 0):,.0f} learner steps, "
                  f"return {counts['latest_return']}", flush=True)
    controller.wait()
    wall_s = time.time() - started
    curve = d4pg.read_curve(output_dir)
    if not curve:
        raise RuntimeError(f"the evaluator recorded nothing; see the logs in {controller.log_dir}")
    events = d4pg.read_curve(output_dir, counting.EVENTS_FILE)
    plot = os.path.join(output_dir, "curve.png")
    draw_curve(curve, plot, events=events)
    print(json.dumps({
        "benchmark": "d4pg_pendulum",
        "final_return": round(curve[-1]["return"], 1),
        "first_return": round(curve[0]["return"], 1),
        "best_return": round(max(row["return"] for row in curve), 1),
        "target_return": TARGET_RETURN,
        "wall_s_to_target": first_time_beyond(curve, TARGET_RETURN),
        "wall_s": round(wall_s, 1),
        "actor_steps": curve[-1]["actor_steps"],
        "learner_steps": curve[-1]["learner_steps"],
        "evaluations": len(curve),
        "events": events,
        "learner_restarts": controller.restarts().get("learner/0", 0),
        "curve": os.path.join(output_dir, "curve.json"),
        "plot": plot,
        "logs": controller.log_dir,
        "config": dataclasses.asdict(config),
    }))


if __name__ == "__main__":
    app.run(main)
