"""SN-GAN: a class-conditional GAN with spectral normalisation and the hinge loss, trained by
a ReplicatedNode on scikit-learn's 8x8 digits, on one device, many, or many workers.

The trainer (`trainer.SnganTrainer`) is written once, against `launchpad.replicator`; where it
runs is one flag each: `--devices` (replicas in one process: GPUs, or logical CPU devices
where there are none) and `--num_workers` (synchronous worker processes). A `driver` node
holds the trainer's handle: it calls `train(steps)` (on every worker, in sync training),
prints the losses, then how often a classifier trained on the real digits recognises the
generated digits as the class they were made for, has the trainer write a PNG grid of samples
(one row per class), and stops the program.

    python -m examples.sngan.launch --lp_launch_type=local_mp
    python -m examples.sngan.launch --lp_launch_type=local_mp --devices=2
    python -m examples.sngan.launch --lp_launch_type=local_mp --num_workers=2
"""

from __future__ import annotations

import os
import tempfile

from absl import app, flags

import launchpad as lp
from examples.sngan.trainer import SnganTrainer

DEFAULT_OUTPUT_DIR = os.path.join(tempfile.gettempdir(), "sngan")
GRID_FILE = "samples.png"

_DEVICES = flags.DEFINE_integer("devices", 1, "Replicas per worker process.", lower_bound=1)
_NUM_WORKERS = flags.DEFINE_integer("num_workers", 1, "Synchronous worker processes.",
                                    lower_bound=1)
_STEPS = flags.DEFINE_integer("steps", 2000, "Training steps (one D and one G update each).",
                              lower_bound=1)
_STEPS_PER_CALL = flags.DEFINE_integer("steps_per_call", 250, "Steps per train() call.",
                                       lower_bound=1)
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 64, "Real digits per step, over all "
                                   "replicas (and as many generated ones).", lower_bound=1)
_D_LEARNING_RATE = flags.DEFINE_float("d_learning_rate", 4e-4, "The discriminator's Adam "
                                      "learning rate.")
_G_LEARNING_RATE = flags.DEFINE_float("g_learning_rate", 1e-4, "The generator's Adam "
                                      "learning rate.")
_BETA_1 = flags.DEFINE_float("beta_1", 0.5, "Adam's beta_1, for both networks.",
                             lower_bound=0.0, upper_bound=0.999)
_NOISE_DIM = flags.DEFINE_integer("noise_dim", 32, "The generator's noise dimensions.",
                                  lower_bound=1)
_HIDDEN = flags.DEFINE_integer("hidden", 256, "Units of each hidden layer of both networks.",
                               lower_bound=1)
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the weights, the data order and the noise.",
                             lower_bound=0)
_OUTPUT_DIR = flags.DEFINE_string("output_dir", DEFAULT_OUTPUT_DIR,
                                  "Where the sample grid (samples.png) is written.")

for _rate in (_D_LEARNING_RATE, _G_LEARNING_RATE):
    flags.register_validator(_rate.name, lambda value: value > 0,
                             message=f"--{_rate.name} must be positive")
flags.register_multi_flags_validator(
    [_BATCH_SIZE.name, _DEVICES.name, _NUM_WORKERS.name],
    lambda values: values["batch_size"] % (values["devices"] * values["num_workers"]) == 0,
    message="--batch_size must be a multiple of the replicas, --devices x --num_workers")


def drive(trainer, steps: int, steps_per_call: int, grid_path: str) -> None:
    """The driver: trains through the handle, prints the losses and the recognised fraction,
    has the trainer write the sample grid, then stops the program."""
    print(f"driver: training {trainer.describe()}", flush=True)
    done = 0
    while done < steps:
        result = trainer.train(min(steps_per_call, steps - done))
        print(f"driver: steps {done + 1}-{result['steps_done']}: D loss {result['d_loss']:.3f}, "
              f"G loss {result['g_loss']:.3f} ({result['steps_per_s']:.0f} steps/s)", flush=True)
        done = result["steps_done"]
    evaluation = trainer.evaluate()
    print(f"driver: after {done} steps, {evaluation['recognised_fraction']:.1%} of the generated "
          "digits are recognised as their class (chance 10%); within-class spread "
          f"{evaluation['spread_ratio']:.2f}x the real digits'", flush=True)
    print(f"driver: wrote the sample grid to {trainer.write_sample_grid(grid_path)}", flush=True)
    lp.stop()


def make_program(devices: int = 1, num_workers: int = 1, steps: int = 2000,
                 steps_per_call: int = 250, batch_size: int = 64,
                 d_learning_rate: float = 4e-4, g_learning_rate: float = 1e-4,
                 beta_1: float = 0.5, noise_dim: int = 32, hidden: int = 256, seed: int = 0,
                 output_dir: str = DEFAULT_OUTPUT_DIR
                 ) -> lp.Program:
    program = lp.Program("sngan")
    trainer = program.add_node(lp.ReplicatedNode(
        SnganTrainer, global_batch=batch_size, noise_dim=noise_dim, hidden=hidden,
        d_learning_rate=d_learning_rate, g_learning_rate=g_learning_rate, beta_1=beta_1,
        seed=seed, num_workers=num_workers, devices=devices,
        courier_client_kwargs={"call_timeout": 600, "connect_timeout": 120}), label="trainer")
    grid_path = os.path.join(os.path.abspath(output_dir), GRID_FILE)
    program.add_node(lp.PyNode(drive, trainer, steps, steps_per_call, grid_path),
                     label="driver")
    return program


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    controller = lp.launch(make_program(
        _DEVICES.value, _NUM_WORKERS.value, _STEPS.value, _STEPS_PER_CALL.value,
        _BATCH_SIZE.value, _D_LEARNING_RATE.value, _G_LEARNING_RATE.value, _BETA_1.value,
        _NOISE_DIM.value, _HIDDEN.value, _SEED.value, _OUTPUT_DIR.value))
    controller.wait()
    print("Program stopped cleanly.", flush=True)


if __name__ == "__main__":
    app.run(main)
