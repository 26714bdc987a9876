"""ResNet: a ResNet-50 trained by a ReplicatedNode, on one device, many, or many workers.

The trainer (`trainer.ResNetTrainer`) is written once, against `launchpad.replicator`: it builds the
model and optimizer inside `replicator.scope()`, reads batches from
`replicator.distribute_dataset`, and runs its step with `replicator.run`. Where it runs is
one flag each: `--devices` (replicas in one process: GPUs, or logical CPU devices where there
are none), `--num_workers` (worker processes) and `--mode` (sync all-reduce, or async with
`--num_ps` parameter servers). The images are made on the fly: noise plus one of 10 fixed
patterns, the pattern's index being the label, so the loss has something to learn.

A `driver` node holds the trainer's handle: it calls `train(steps)` on the chief (in sync
training, each call runs on every worker) and prints how the loss moves, then stops the
program.

    python -m examples.resnet.launch --lp_launch_type=local_mp --num_workers=2
    python -m examples.resnet.launch --lp_launch_type=local_mp --devices=2
    python -m examples.resnet.launch --lp_launch_type=local_mp --num_workers=2 --mode=async
"""

from __future__ import annotations

from absl import app, flags

import launchpad as lp
from examples.resnet.trainer import ResNetTrainer

_DEVICES = flags.DEFINE_integer("devices", 1, "Replicas per worker process.", lower_bound=1)
_NUM_WORKERS = flags.DEFINE_integer("num_workers", 1, "Worker processes.", lower_bound=1)
_MODE = flags.DEFINE_enum("mode", "sync", ["sync", "async"], "Sync all-reduce or async "
                          "parameter servers.")
_NUM_PS = flags.DEFINE_integer("num_ps", 1, "Parameter servers (async only).", lower_bound=1)
_STEPS = flags.DEFINE_integer("steps", 30, "Training steps.", lower_bound=1)
_STEPS_PER_CALL = flags.DEFINE_integer("steps_per_call", 10, "Steps per train() call.",
                                       lower_bound=1)
_GLOBAL_BATCH = flags.DEFINE_integer("global_batch", 32, "Images per step, over all replicas.")
_WIDTH = flags.DEFINE_integer("width", 8, "ResNet-50's first-stage width (64: the original).")
_IMAGE_SIZE = flags.DEFINE_integer("image_size", 32, "Image height and width.")
_LEARNING_RATE = flags.DEFINE_float("learning_rate", 0.03, "SGD's learning rate (momentum 0.9).")

def drive(trainer, steps: int, steps_per_call: int) -> None:
    """The driver: trains through the handle, prints the loss, then stops the program."""
    print(f"driver: training {trainer.describe()}", flush=True)
    losses = []
    while len(losses) < steps:
        result = trainer.train(min(steps_per_call, steps - len(losses)))
        first = len(losses) + 1
        losses += result["losses"]
        print(f"driver: steps {first}-{len(losses)}: loss {result['losses'][0]:.3f} -> "
              f"{result['losses'][-1]:.3f} ({result['steps_per_s']:.1f} steps/s)", flush=True)
    window = max(1, min(5, len(losses) // 3))
    before, after = sum(losses[:window]) / window, sum(losses[-window:]) / window
    verdict = "fell" if after < before else "did not fall"
    print(f"driver: the loss {verdict} from {before:.3f} to {after:.3f} over {len(losses)} "
          "steps", flush=True)
    lp.stop()


def make_program(devices: int = 1, num_workers: int = 1, mode: str = "sync", num_ps: int = 1,
                 steps: int = 30, steps_per_call: int = 10, global_batch: int = 32,
                 width: int = 8, image_size: int = 32, learning_rate: float = 0.03
                 ) -> lp.Program:
    program = lp.Program("resnet")
    trainer = program.add_node(lp.ReplicatedNode(
        ResNetTrainer, global_batch=global_batch, image_size=image_size, width=width,
        learning_rate=learning_rate,
        num_workers=num_workers, mode=mode, devices=devices,
        num_ps=num_ps if mode == "async" else None,
        courier_client_kwargs={"call_timeout": 600}), label="trainer")
    program.add_node(lp.PyNode(drive, trainer, steps, steps_per_call), label="driver")
    return program


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    controller = lp.launch(make_program(
        _DEVICES.value, _NUM_WORKERS.value, _MODE.value, _NUM_PS.value, _STEPS.value,
        _STEPS_PER_CALL.value, _GLOBAL_BATCH.value, _WIDTH.value, _IMAGE_SIZE.value,
        _LEARNING_RATE.value))
    controller.wait()
    print("Program stopped cleanly.", flush=True)


if __name__ == "__main__":
    app.run(main)
