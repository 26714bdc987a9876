"""Benchmark: the ResNet example through the Replicator against hand-written tf.distribute.

Run: `python -m benchmarks.replicator [--rounds N] [--steps S]`. Prints one JSON object on
stdout; progress goes to stderr. Needs TensorFlow (the `tensorflow` extra: both venvs).

Three figures, each measured in the same run:

* overhead: steps/s of the example's trainer (`ResNetTrainer.train`: `Replicator.run`, then
  `Replicator.reduce` of each step's loss) against a hand-written tf.distribute loop on the
  same strategy, model, optimizer and input (one `tf.function` of `strategy.run` and
  `strategy.reduce`), for one device and for two logical CPU devices. Target: the replicator
  within 5% (ratio >= 0.95).
* device scaling: steps/s with 2 logical devices over steps/s with 1, same global batch.
* worker scaling: steps/s of a ReplicatedNode with 2 sync workers over one with 1 worker,
  both launched with local_mp and driven through their handles; the steps/s is what the
  chief's `train` measured, so it leaves the call through the handle out.

Every pair is measured in interleaved rounds (`--rounds` times, `--steps` steps each side),
after a warm-up that traces the step functions; a figure is the steps over the seconds
summed over its rounds. On this 2-core machine there is no spare hardware to scale onto: two
replicas share the same two cores that one replica's kernels already use, so scaling shows
what replication costs rather than what it gains.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

GLOBAL_BATCH = 32
IMAGE_SIZE = 32
WIDTH = 8


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _hand_written_loop(strategy, trainer, input_fn):
    """The loop a tf.distribute user writes for the same model, optimizer and input."""
    import tensorflow as tf
    iterator = iter(strategy.distribute_datasets_from_function(input_fn))
    model, optimizer = trainer.model, trainer.optimizer

    def step_fn(batch):
        images, labels = batch
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            loss = tf.reduce_sum(tf.keras.losses.sparse_categorical_crossentropy(
                labels, logits, from_logits=True)) / GLOBAL_BATCH
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def train_step():
        losses = strategy.run(step_fn, args=(next(iterator),))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    def train(steps: int) -> float:
        started = time.perf_counter()
        for _ in range(steps):
            float(train_step())
        return time.perf_counter() - started

    return train


def _interleaved(sides: dict, rounds: int, steps: int) -> dict[str, float]:
    """steps/s of each side: `train(steps)` returns its seconds; sides alternate who goes
    first each round."""
    seconds = dict.fromkeys(sides, 0.0)
    order = list(sides)
    for side in order:
        sides[side](2)  # warm-up: traces the step function
    for round_index in range(rounds):
        for side in order[::1 if round_index % 2 == 0 else -1]:
            seconds[side] += sides[side](steps)
    return {side: rounds * steps / total for side, total in seconds.items()}


def measure_in_process(rounds: int, steps: int) -> dict:
    """The replicator against the hand-written loop, on 1 and on 2 logical CPU devices."""
    from examples.resnet.trainer import ResNetTrainer, synthetic_input_fn
    from launchpad import replicator
    replicator.use_logical_cpus(2)
    results = {}
    for devices in (1, 2):
        _progress(f"in process: {devices} device(s)")
        repl = replicator.Replicator(devices=devices)
        with repl.scope():
            trainer = ResNetTrainer(repl, GLOBAL_BATCH, IMAGE_SIZE, WIDTH)
        rates = _interleaved({
            "replicator": lambda n, t=trainer: n / t.train(n)["steps_per_s"],
            "hand_written_tf_distribute": _hand_written_loop(
                repl.strategy, trainer, synthetic_input_fn(GLOBAL_BATCH, IMAGE_SIZE)),
        }, rounds, steps)
        results[f"{devices}_device"] = {
            **{f"{side}_steps_per_s": round(rate, 3) for side, rate in rates.items()},
            "ratio": round(rates["replicator"] / rates["hand_written_tf_distribute"], 3)}
    return results


def measure_workers(rounds: int, steps: int) -> dict[str, float]:
    """steps/s of a ReplicatedNode with 1 and with 2 sync workers (local_mp), driven through
    their handles."""
    import launchpad as lp
    from examples.resnet.trainer import ResNetTrainer
    programs, handles = [], {}
    for workers in (1, 2):
        program = lp.Program(f"replicator-benchmark-{workers}")
        handles[workers] = program.add_node(lp.ReplicatedNode(
            ResNetTrainer, GLOBAL_BATCH, IMAGE_SIZE, WIDTH, num_workers=workers,
            courier_client_kwargs={"call_timeout": 600}), label="trainer")
        programs.append(program)
    _progress("workers: launching 1 + 2 worker processes")
    controllers = lp.launch(programs, launch_type="local_mp", terminal="output_to_files")
    try:
        trainers = {workers: handle.dereference() for workers, handle in handles.items()}
        return _interleaved({
            f"{workers}_worker": (lambda n, t=trainer: n / t.train(n)["steps_per_s"])
            for workers, trainer in trainers.items()}, rounds, steps)
    finally:
        for controller in controllers:
            controller.stop()
        for controller in controllers:
            controller.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=10, help="per side and round")
    args = parser.parse_args(argv)
    overhead = measure_in_process(args.rounds, args.steps)
    workers = measure_workers(args.rounds, args.steps)
    import tensorflow as tf
    report = {
        "machine": {"python": platform.python_version(), "tensorflow": tf.__version__},
        "model": f"ResNet-50 width {WIDTH}, {IMAGE_SIZE}x{IMAGE_SIZE} images, global batch "
                 f"{GLOBAL_BATCH}",
        "rounds": args.rounds, "steps_per_side_and_round": args.steps,
        "overhead": overhead,
        "device_scaling_2_over_1": round(
            overhead["2_device"]["replicator_steps_per_s"]
            / overhead["1_device"]["replicator_steps_per_s"], 3),
        "workers": {**{f"{k}_steps_per_s": round(v, 3) for k, v in workers.items()},
                    "worker_scaling_2_over_1": round(workers["2_worker"] / workers["1_worker"],
                                                     3)},
        "target_met": all(f["ratio"] >= 0.95 for f in overhead.values()),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
