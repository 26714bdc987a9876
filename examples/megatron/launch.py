"""Megatron: a classifier of the digits whose wide layer is split over a mesh of devices
(model parallelism), or whole on one device: the same trainer, one flag apart.

    python -m examples.megatron.launch --lp_launch_type=local_mp --mesh=batch:2,model:2
    python -m examples.megatron.launch --lp_launch_type=local_mp --devices=1

The trainer (`trainer.MegatronTrainer`, a CourierNode) builds its model inside
`replicator.Replicator(mesh=..., layouts=...)`: the wide layer's weight split by columns along
the mesh's "model" axis, the output layer's by rows, each batch split along "batch". A driver
node (the resnet example's) trains it through its handle, printing the loss and the held-out
accuracy, then stops the program. On a machine without GPUs the mesh's devices are logical
devices of the CPU.
"""

from __future__ import annotations

from absl import app, flags

import launchpad as lp
from examples.megatron.trainer import MegatronTrainer, parse_mesh
from examples.resnet.driver import drive

_MESH = flags.DEFINE_string("mesh", "", "Mesh mode: AXIS:SIZE,... e.g. batch:2,model:2 (the "
                            "wide layer split along 'model', batches along 'batch').")
_DEVICES = flags.DEFINE_integer("devices", None, "1: everything on one device (the default "
                                "without --mesh).", lower_bound=1, upper_bound=1)
_STEPS = flags.DEFINE_integer("steps", 300, "Training steps.", lower_bound=1)
_STEPS_PER_CALL = flags.DEFINE_integer("steps_per_call", 50, "Steps per train() call; the "
                                       "driver reports after each.", lower_bound=1)
_HIDDEN = flags.DEFINE_integer("hidden", 1024, "The wide layer's width.", lower_bound=1)
_GLOBAL_BATCH = flags.DEFINE_integer("global_batch", 64, "Images per step.", lower_bound=1)
_LEARNING_RATE = flags.DEFINE_float("learning_rate", 1e-3, "Adam's learning rate.")


def _check_mesh(values: dict) -> bool:
    if values["mesh"] and values["devices"] is not None:
        raise flags.ValidationError("--mesh and --devices=1 are two ways to run: pick one")
    if not values["mesh"]:
        return True
    try:
        mesh = parse_mesh(values["mesh"])
    except ValueError as e:
        raise flags.ValidationError(str(e)) from None
    if values["hidden"] % mesh.get("model", 1):
        raise flags.ValidationError(f"--hidden={values['hidden']} does not split over the "
                                    f"mesh's model axis ({mesh.get('model')})")
    if values["global_batch"] % mesh.get("batch", 1):
        raise flags.ValidationError(f"--global_batch={values['global_batch']} does not split "
                                    f"over the mesh's batch axis ({mesh.get('batch')})")
    return True


flags.register_validator("learning_rate", lambda rate: rate > 0, "must be positive")
flags.register_multi_flags_validator(["mesh", "devices", "hidden", "global_batch"],
                                     _check_mesh)


def make_program(mesh: str = "", steps: int = 300, steps_per_call: int = 50,
                 hidden: int = 1024, global_batch: int = 64,
                 learning_rate: float = 1e-3) -> lp.Program:
    program = lp.Program("megatron")
    trainer = program.add_node(lp.CourierNode(
        MegatronTrainer, mesh=mesh, hidden=hidden, global_batch=global_batch,
        learning_rate=learning_rate,
        # The trainer serves once it has imported TensorFlow and built its mesh.
        courier_client_kwargs={"call_timeout": 600, "connect_timeout": 120}), label="trainer")
    program.add_node(lp.PyNode(drive, trainer, steps, steps_per_call), label="driver")
    return program


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    program = make_program(_MESH.value, _STEPS.value, _STEPS_PER_CALL.value, _HIDDEN.value,
                           _GLOBAL_BATCH.value, _LEARNING_RATE.value)
    controller = lp.launch(program)
    controller.wait()
    print("Program stopped cleanly.", flush=True)


if __name__ == "__main__":
    app.run(main)
