"""ResNet: a ResNet-50 trained by a ReplicatedNode on the digits, on one device, many, or many
workers, checkpointed and resumed.

The trainer (`trainer.ResNetTrainer`) is written once, against `launchpad.replicator`: it builds
the model and optimizer inside `replicator.scope()`, reads batches from
`replicator.distribute_dataset`, and runs its step with `replicator.run`. Where it runs is one
flag each: `--devices` (replicas in one process: GPUs, or logical CPU devices where there are
none), `--num_workers` (worker processes) and `--mode` (sync all-reduce, or async with
`--num_ps` parameter servers). The data are scikit-learn's 8x8 digits (`digits.py`), upsampled
to `--image_size`, with a fixed held-out test split.

A `driver` node holds the trainer's handle: it calls `train(steps)` on the chief (in sync
training, each call runs on every worker), then `evaluate()`, and prints the loss and the test
accuracy, until the step counter reaches `--steps`; then it stops the program. With
`--checkpoint_dir` the trainer checkpoints every `--checkpoint_every` steps and, started again,
resumes from the latest checkpoint there (the driver says from which step).

    python -m examples.resnet.launch --lp_launch_type=local_mt
    python -m examples.resnet.launch --lp_launch_type=local_mp --devices=2
    python -m examples.resnet.launch --lp_launch_type=local_mp --num_workers=2
    python -m examples.resnet.launch --lp_launch_type=local_mp --num_workers=2 --mode=async
    python -m examples.resnet.launch --lp_launch_type=local_mt --checkpoint_dir=/tmp/resnet
"""

from __future__ import annotations

import os

from absl import app, flags

import launchpad as lp
from examples.resnet.driver import drive
from examples.resnet.trainer import ResNetTrainer

DEFAULT_CHECKPOINT_EVERY = 100

_DEVICES = flags.DEFINE_integer("devices", 1, "Replicas per worker process.", lower_bound=1)
_NUM_WORKERS = flags.DEFINE_integer("num_workers", 1, "Worker processes.", lower_bound=1)
_MODE = flags.DEFINE_enum("mode", "sync", ["sync", "async"], "Sync all-reduce or async "
                          "parameter servers.")
_NUM_PS = flags.DEFINE_integer("num_ps", None, "Parameter servers (--mode=async only; "
                               "default 1).", lower_bound=1)
_STEPS = flags.DEFINE_integer("steps", 200, "Train until the step counter reaches this (a "
                              "resumed run starts from its checkpoint's step).", lower_bound=1)
_STEPS_PER_CALL = flags.DEFINE_integer("steps_per_call", 20, "Steps per train() call; the "
                                       "driver reports the loss and test accuracy after each.",
                                       lower_bound=1)
_GLOBAL_BATCH = flags.DEFINE_integer("global_batch", 32, "Images per step, over all replicas.",
                                     lower_bound=1)
_WIDTH = flags.DEFINE_integer("width", 8, "ResNet-50's first-stage width (64: the original).",
                              lower_bound=1)
_IMAGE_SIZE = flags.DEFINE_integer("image_size", 32, "Height and width the digits are "
                                   "upsampled to.", lower_bound=8)
_LEARNING_RATE = flags.DEFINE_float("learning_rate", 0.03, "SGD's learning rate (momentum 0.9).")
_CHECKPOINT_DIR = flags.DEFINE_string("checkpoint_dir", "", "Where the trainer checkpoints and "
                                      "resumes from (empty: no checkpoints).")
_CHECKPOINT_EVERY = flags.DEFINE_integer(
    "checkpoint_every", None, f"Steps between checkpoints (with --checkpoint_dir; default "
    f"{DEFAULT_CHECKPOINT_EVERY}).", lower_bound=1)


def _check_workers_devices(values: dict) -> bool:
    if values["devices"] > 1 and (values["num_workers"] > 1 or values["mode"] == "async"):
        import tensorflow as tf  # only here: the launcher otherwise runs without TensorFlow
        if not tf.config.list_physical_devices("GPU"):
            raise flags.ValidationError(
                f"--devices={values['devices']} with several workers needs GPUs: on CPUs each "
                "worker process is one replica")
    return True


def _check_batch_splits(values: dict) -> bool:
    replicas = values["devices"] * (values["num_workers"] if values["mode"] == "sync" else 1)
    if values["global_batch"] % replicas:
        raise flags.ValidationError(f"--global_batch={values['global_batch']} does not split "
                                    f"evenly over {replicas} replicas")
    return True


flags.register_validator("learning_rate", lambda rate: rate > 0, "must be positive")
flags.register_validator("checkpoint_dir", lambda path: not os.path.exists(path or "")
                         or os.path.isdir(path), "must be a directory (or not exist yet)")
flags.register_multi_flags_validator(
    ["num_ps", "mode"], lambda values: values["num_ps"] is None or values["mode"] == "async",
    "--num_ps is for --mode=async: sync training has no parameter servers")
flags.register_multi_flags_validator(
    ["checkpoint_every", "checkpoint_dir"],
    lambda values: values["checkpoint_every"] is None or bool(values["checkpoint_dir"]),
    "--checkpoint_every needs --checkpoint_dir")
flags.register_multi_flags_validator(["devices", "num_workers", "mode"], _check_workers_devices)
flags.register_multi_flags_validator(["global_batch", "devices", "num_workers", "mode"],
                                     _check_batch_splits)


def make_program(devices: int = 1, num_workers: int = 1, mode: str = "sync",
                 num_ps: int | None = None, steps: int = 200, steps_per_call: int = 20,
                 global_batch: int = 32, width: int = 8, image_size: int = 32,
                 learning_rate: float = 0.03, checkpoint_dir: str | None = None,
                 checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY) -> lp.Program:
    program = lp.Program("resnet")
    trainer = program.add_node(lp.ReplicatedNode(
        ResNetTrainer, global_batch=global_batch, image_size=image_size, width=width,
        learning_rate=learning_rate, checkpoint_dir=checkpoint_dir,
        checkpoint_every=checkpoint_every,
        num_workers=num_workers, mode=mode, devices=devices, num_ps=num_ps,
        # The trainer registers once it has imported TensorFlow: tens of seconds on a busy
        # machine, longer than a client's default wait for an address.
        courier_client_kwargs={"call_timeout": 600, "connect_timeout": 120}), label="trainer")
    program.add_node(lp.PyNode(drive, trainer, steps, steps_per_call), label="driver")
    return program


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    checkpoint_dir = None
    if _CHECKPOINT_DIR.value:
        checkpoint_dir = os.path.abspath(_CHECKPOINT_DIR.value)  # nodes may run elsewhere
        try:
            os.makedirs(checkpoint_dir, exist_ok=True)
        except OSError as e:
            raise SystemExit(f"--checkpoint_dir={_CHECKPOINT_DIR.value}: {e}") from e
    controller = lp.launch(make_program(
        _DEVICES.value, _NUM_WORKERS.value, _MODE.value, _NUM_PS.value, _STEPS.value,
        _STEPS_PER_CALL.value, _GLOBAL_BATCH.value, _WIDTH.value, _IMAGE_SIZE.value,
        _LEARNING_RATE.value, checkpoint_dir,
        _CHECKPOINT_EVERY.value or DEFAULT_CHECKPOINT_EVERY))
    controller.wait()
    print("Program stopped cleanly.", flush=True)


if __name__ == "__main__":
    app.run(main)
