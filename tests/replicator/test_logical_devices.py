"""TF-Replicator's logical devices: two replicas of two logical CPU devices each, an encoder on
each replica's device 0 and a decoder on its device 1, train to the weights of one device; each
variable's copies live on the logical device asked for; misuse is named."""

from __future__ import annotations

import numpy as np
import pytest

from tests.stacks import NO_TENSORFLOW

tf = pytest.importorskip("tensorflow", reason=NO_TENSORFLOW)

from launchpad import replicator  # noqa: E402 - after the skip

STEPS = 12
GLOBAL_BATCH = 8
_rng = np.random.default_rng(3)
ENCODER = _rng.normal(size=(6, 10)).astype(np.float32) / 3
DECODER = _rng.normal(size=(10, 2)).astype(np.float32) / 3
FEATURES = _rng.normal(size=(STEPS * GLOBAL_BATCH, 6)).astype(np.float32)
TARGETS = np.tanh(FEATURES[:, :2])


def _input_fn(context):
    return tf.data.Dataset.from_tensor_slices((FEATURES, TARGETS)).batch(
        context.get_per_replica_batch_size(GLOBAL_BATCH))


def _train(repl, split: bool, placed: list | None = None):
    def on_variables(i):
        return repl.logical_device_for_variables(i) if split else _nothing()

    def on_ops(i):
        return repl.logical_device(i) if split else _nothing()

    with repl.scope():
        with on_variables(0):
            encoder = tf.Variable(ENCODER, name="encoder")
        with on_variables(1):
            decoder = tf.Variable(DECODER, name="decoder")
        optimizer = tf.keras.optimizers.SGD(0.1, momentum=0.5)
        optimizer.build([encoder, decoder])
    inputs = iter(repl.distribute_dataset(_input_fn))

    def step(batch):
        features, targets = batch
        with tf.GradientTape() as tape:
            with on_ops(0):
                hidden = tf.nn.relu(features @ encoder)
            with on_ops(1):
                error = hidden @ decoder - targets
                loss = tf.reduce_sum(tf.square(error)) / GLOBAL_BATCH
        if placed is not None:  # (as traced, once per replica)
            placed.append((hidden.device, error.device))
        variables = [encoder, decoder]
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
        return loss

    losses = [float(repl.reduce(repl.run(step, inputs), "sum")) for _ in range(STEPS)]
    return losses, encoder, decoder


class _nothing:  # noqa: N801 - a context that does nothing, named as the others are
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False



def test_replicas_of_two_logical_devices_train_to_the_weights_of_one_device():
    one_losses, one_encoder, one_decoder = _train(replicator.Replicator(devices=1), False)
    repl = replicator.Replicator(devices=4, devices_per_replica=2)
    placed = []
    losses, encoder, decoder = _train(repl, True, placed)
    assert sorted((tf.DeviceSpec.from_string(h).device_index,
                   tf.DeviceSpec.from_string(e).device_index) for h, e in placed) == [
        (0, 1), (2, 3)]  # each replica's ops on its own logical devices 0 and 1
    assert repl.num_replicas == 2
    np.testing.assert_allclose(losses, one_losses, rtol=1e-5)
    for found, expected in ((encoder, one_encoder), (decoder, one_decoder)):
        for copy in found.values:
            np.testing.assert_allclose(copy.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)
    assert [tf.DeviceSpec.from_string(v.device).device_index for v in encoder.values] == [0, 2]
    assert [tf.DeviceSpec.from_string(v.device).device_index for v in decoder.values] == [1, 3]
    assert losses[-1] < losses[0]


def test_logical_devices_are_checked_and_named():
    with pytest.raises(ValueError, match="needs devices= a count it divides"):
        replicator.Replicator(devices=3, devices_per_replica=2)
    with pytest.raises(ValueError, match=r"needs Replicator\(devices_per_replica"):
        replicator.Replicator(devices=1).logical_device(0)
    repl = replicator.Replicator(devices=4, devices_per_replica=2)
    with pytest.raises(ValueError, match="logical devices 0 to 1, not 2"):
        repl.logical_device_for_variables(2).__enter__()
    with pytest.raises(RuntimeError, match="inside a step_fn"):
        repl.logical_device(0).__enter__()
