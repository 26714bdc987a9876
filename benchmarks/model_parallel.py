"""Benchmark: what splitting a layer over a mesh saves and costs. One 4096x16384 float32 layer
trained with Adam (256 MiB of weights, 512 MiB of slots: 768 MiB), in four placements:

* `devices=1`: everything on one device;
* data-parallel over 4 (`devices=4`, Keras' Adam): every device holds everything;
* mesh 2x2 and mesh 1x4 (`mesh=`, the weight split by columns along "model",
  `replicator.optimizers.Adam`): each device holds 1/model of the weight and its slots.

For each: bytes of weights and slots held per device (from the variables' layouts: the largest
device's), the process's peak RSS (each placement runs in a process of its own, its devices
logical devices of the CPU), and steps/s at the same global batch. And mesh mode against the
same model written directly in DTensor (the same mesh, layouts, Adam and batches), in
interleaved rounds in one process, each side fetching every step's loss: target, our overhead
<= 5% (ratio >= 0.95).

Run: `python -m benchmarks.model_parallel [--steps S] [--rounds R]`. Prints one JSON object on
stdout; progress on stderr. On two cores there is no speed-up to have: the case is memory.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

ROWS, COLUMNS = 4096, 16384
GLOBAL_BATCH = 64
PLACEMENTS = {"one_device": {"devices": 1}, "data_parallel_4": {"devices": 4},
              "mesh_2x2": {"mesh": {"batch": 2, "model": 2}},
              "mesh_1x4": {"mesh": {"batch": 1, "model": 4}}}
LAYOUTS = {r"wide/kernel": (None, "model"), r"wide/bias": ("model",)}


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _peak_rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _per_device_bytes(variables, repl) -> float:
    """The largest device's bytes of `variables`, from their layouts (nothing is read)."""
    mesh = repl.mesh_shape or {}  # (data-parallel: every device holds every variable whole)
    total = 0
    for variable in variables:
        size = variable.shape.num_elements() * variable.dtype.size
        for axis in filter(None, repl.layout_of(variable) or ()):
            size //= mesh[axis]
        total += size
    return total


def _data(tf):
    features = tf.random.stateless_normal((GLOBAL_BATCH * 4, ROWS), seed=(1, 2))
    targets = tf.random.stateless_normal((GLOBAL_BATCH * 4, COLUMNS), seed=(3, 4))
    return tf.data.Dataset.from_tensor_slices((features, targets))


def _ours(placement: dict):
    """The layer through the replicator: its step function, its variables and slots."""
    import tensorflow as tf

    from launchpad import replicator
    meshed = "mesh" in placement
    repl = (replicator.Replicator(mesh=placement["mesh"], layouts=LAYOUTS) if meshed
            else replicator.Replicator(devices=placement["devices"]))
    with repl.scope():
        layer = tf.keras.layers.Dense(COLUMNS, name="wide")
        tf.keras.Sequential([layer]).build((None, ROWS))  # (built in its name scope)
        optimizer = (replicator.optimizers.Adam(1e-4) if meshed or repl.num_replicas == 1
                     else tf.keras.optimizers.Adam(1e-4))
        optimizer.build(layer.trainable_variables)
    inputs = iter(repl.distribute_dataset(lambda context: _data(tf).repeat().batch(
        context.get_per_replica_batch_size(GLOBAL_BATCH))))

    def step(batch):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(layer(batch[0]) - batch[1]))
        gradients = replicator.all_reduce(tape.gradient(loss, layer.trainable_variables),
                                          "mean" if repl.num_replicas > 1 else "sum")
        optimizer.apply_gradients(zip(gradients, layer.trainable_variables, strict=True))
        return loss

    def run_step():
        return float(repl.reduce(repl.run(step, inputs)))

    held = list(layer.trainable_variables)
    if isinstance(optimizer, replicator.optimizers.Optimizer):
        held += [slot for slots in optimizer._slots.values() for slot in slots.values()]
    else:
        held += [v for v in optimizer.variables if v.shape.rank]
    return run_step, _per_device_bytes(held, repl)


def _direct_dtensor(shape: dict):
    """The same layer written directly in DTensor: variables, Adam and input by hand."""
    import tensorflow as tf
    from tensorflow.experimental import dtensor
    mesh = dtensor.create_mesh(list(shape.items()),
                               devices=[d.name for d in tf.config.list_logical_devices("CPU")])
    kernel_layout = dtensor.Layout([dtensor.UNSHARDED, "model"], mesh)
    bias_layout = dtensor.Layout(["model"], mesh)
    kernel = dtensor.DVariable(dtensor.call_with_layout(  # (its values do not change speed)
        tf.zeros, kernel_layout, shape=(ROWS, COLUMNS)))
    bias = dtensor.DVariable(dtensor.call_with_layout(tf.zeros, bias_layout, shape=(COLUMNS,)))
    slots = [(dtensor.DVariable(dtensor.call_with_layout(tf.zeros, layout, shape=v.shape)),
              dtensor.DVariable(dtensor.call_with_layout(tf.zeros, layout, shape=v.shape)))
             for v, layout in ((kernel, kernel_layout), (bias, bias_layout))]
    count = dtensor.DVariable(dtensor.call_with_layout(
        tf.zeros, dtensor.Layout.replicated(mesh, 0), shape=(), dtype=tf.int64))
    batch_layouts = [dtensor.Layout(["batch", dtensor.UNSHARDED], mesh)] * 2
    iterator = iter(_data(tf).repeat().batch(GLOBAL_BATCH))

    @tf.function
    def step(features, targets):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(features @ kernel + bias - targets))
        gradients = tape.gradient(loss, [kernel, bias])
        t = tf.cast(count + 1, tf.float32)
        rate = 1e-4 * tf.sqrt(1 - tf.pow(0.999, t)) / (1 - tf.pow(0.9, t))
        for variable, gradient, (m, v) in zip([kernel, bias], gradients, slots, strict=True):
            new_m = m + (gradient - m) * 0.1
            new_v = v + (tf.square(gradient) - v) * 0.001
            m.assign(new_m)
            v.assign(new_v)
            variable.assign_sub(rate * new_m / (tf.sqrt(new_v) + 1e-7))
        count.assign_add(1)
        return loss

    def run_step():  # the loss fetched each step, as Replicator.reduce does for ours
        features, targets = next(iterator)
        placed = [dtensor.relayout(dtensor.copy_to_mesh(
            t, dtensor.Layout.replicated(mesh, 2)), layout)
            for t, layout in zip((features, targets), batch_layouts, strict=True)]
        return float(dtensor.unpack(step(*placed))[0])

    return run_step


def _timed(run_step, steps: int) -> float:
    began = time.perf_counter()
    for _ in range(steps):
        run_step()  # (each step's loss is fetched: the step has ended)
    return time.perf_counter() - began


def measure(name: str, steps: int, rounds: int) -> dict:
    """One placement, in this process (see the module doc)."""
    placement = PLACEMENTS[name]
    run_ours, per_device = _ours(placement)
    _timed(run_ours, 2)  # traces and warms
    peak_rss = _peak_rss_mib()  # (ours alone: the direct model comes next)
    direct = _direct_dtensor(placement["mesh"]) if "mesh" in placement else None
    if direct is not None:
        _timed(direct, 2)
    seconds = {"ours": 0.0, "direct": 0.0}
    for _ in range(rounds):
        seconds["ours"] += _timed(run_ours, steps)
        if direct is not None:
            seconds["direct"] += _timed(direct, steps)
    figures = {"bytes_per_device_mib": round(per_device / 2**20, 1),
               "steps_per_s": round(steps * rounds / seconds["ours"], 3),
               "peak_rss_mib": round(peak_rss)}
    if direct is not None:
        figures["direct_dtensor_steps_per_s"] = round(steps * rounds / seconds["direct"], 3)
        figures["ours_over_direct"] = round(seconds["direct"] / seconds["ours"], 3)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--placement", choices=list(PLACEMENTS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.placement:  # a child: one placement, its logical devices made first
        from launchpad import replicator
        replicator.use_logical_cpus(4)
        print(json.dumps(measure(args.placement, args.steps, args.rounds)))
        return
    results = {}
    for name in PLACEMENTS:
        _progress(f"model_parallel: {name}")
        child = subprocess.run([sys.executable, "-m", "benchmarks.model_parallel",
                                f"--placement={name}", f"--steps={args.steps}",
                                f"--rounds={args.rounds}"],
                               capture_output=True, text=True, check=True)
        results[name] = json.loads(child.stdout.strip().splitlines()[-1])
    whole = results["one_device"]["bytes_per_device_mib"]
    for figures in results.values():
        figures["bytes_per_device_of_whole"] = round(figures["bytes_per_device_mib"] / whole, 3)
    print(json.dumps({"layer": [ROWS, COLUMNS], "global_batch": GLOBAL_BATCH,
                      "optimizer": "adam", "placements": results}, indent=1))


if __name__ == "__main__":
    main()
