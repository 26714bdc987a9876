"""Benchmark: does the SN-GAN example learn the digits, and how fast, on this CPU?

Run: `python -m benchmarks.sngan_digits [--steps N] [--eval_every K] [--output_dir DIR]`.
Progress goes to stderr; the last line on stdout is one JSON object with, among others,
`recognised_fraction` (after the last step) and `wall_s`. Needs the TensorFlow stack.

It trains the example's trainer (`examples.sngan.trainer.SnganTrainer`, with its defaults) in
this process, on the same `Replicator` a one-worker `ReplicatedNode` builds, rather than
launching the program: the figure is what the model learns per step and per second, and the
curve needs an evaluation every `--eval_every` steps; in process, the launch's start-up (a
TensorFlow import in every node's process) and the calls through the handle stay out of the
seconds. The example's own run through the handle under local_mp is what
tests/examples/test_sngan.py checks.

Every `--eval_every` steps the curve gets a point: steps, seconds since the start (building
the trainer and tracing its step included; evaluating too), the recognised fraction (how often
a classifier trained on the real digits names the class each of 1,000 samples was made for;
chance 10%, target >= 0.60) and the spread ratio (the samples' within-class spread over the
real digits'; near 0 would be mode collapse). The curve (JSON) and the final sample grid (PNG)
are written under `--output_dir`, default `benchmarks/results/sngan_digits/`, which git
ignores: they are remade by every run, and the figures that matter are in the printed JSON
and in examples/sngan/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

TARGET = 0.60
DEFAULT_OUTPUT_DIR = os.path.join("benchmarks", "results", "sngan_digits")


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def measure(steps: int, eval_every: int, devices: int, seed: int) -> tuple[list[dict], object]:
    """Trains for `steps` steps, evaluating every `eval_every`: the curve, and the trainer."""
    from examples.sngan.trainer import SnganTrainer
    from launchpad.replicator.replicator import Replicator
    started = time.perf_counter()
    replicator = Replicator(devices=devices)
    with replicator.scope():
        trainer = SnganTrainer(replicator, seed=seed)
    _progress(f"training {trainer.describe()}")
    curve: list[dict] = []
    done = 0
    while done < steps:
        trained = trainer.train(min(eval_every, steps - done))
        done = trained["steps_done"]
        evaluation = trainer.evaluate()
        curve.append({"steps": done, "wall_s": round(time.perf_counter() - started, 2),
                      "recognised_fraction": evaluation["recognised_fraction"],
                      "spread_ratio": round(evaluation["spread_ratio"], 3),
                      "d_loss": round(trained["d_loss"], 4),
                      "g_loss": round(trained["g_loss"], 4)})
        _progress(json.dumps(curve[-1]))
    return curve, trainer


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=_positive_int, default=6000)
    parser.add_argument("--eval_every", type=_positive_int, default=250)
    parser.add_argument("--devices", type=_positive_int, default=1,
                        help="replicas in this process (logical CPU devices without GPUs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output_dir", default=DEFAULT_OUTPUT_DIR)
    args = parser.parse_args(argv)
    curve, trainer = measure(args.steps, args.eval_every, args.devices, args.seed)
    os.makedirs(args.output_dir, exist_ok=True)
    curve_path = os.path.join(args.output_dir, "curve.json")
    with open(curve_path, "w") as file:
        json.dump(curve, file, indent=1)
    grid_path = trainer.write_sample_grid(os.path.join(args.output_dir, "samples.png"))
    first_met = next((point for point in curve if point["recognised_fraction"] >= TARGET), None)
    import tensorflow as tf
    print(json.dumps({
        "benchmark": "sngan_digits",
        "machine": {"python": platform.python_version(), "tensorflow": tf.__version__,
                    "cpus": os.cpu_count()},
        "model": trainer.describe(),
        "steps": curve[-1]["steps"],
        "recognised_fraction": curve[-1]["recognised_fraction"],
        "spread_ratio": curve[-1]["spread_ratio"],
        "wall_s": curve[-1]["wall_s"],
        "best_recognised_fraction": max(point["recognised_fraction"] for point in curve),
        "target": TARGET,
        "target_met": curve[-1]["recognised_fraction"] >= TARGET,
        "first_at_target": first_met and {"steps": first_met["steps"],
                                          "wall_s": first_met["wall_s"]},
        "curve": curve_path, "grid": grid_path,
    }))


if __name__ == "__main__":
    main()
