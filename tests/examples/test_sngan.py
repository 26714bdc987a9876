"""The SN-GAN example: its spectral normalisation and hinge losses against hand-computed and
numpy values, one power iteration per training step, and its real entry point under local_mp
(it stops by itself and writes the sample grid). Whether it learns is measured by
`python -m benchmarks.sngan_digits`, not here."""

from __future__ import annotations

import math

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow", reason="the SN-GAN example needs TensorFlow")
pytest.importorskip("sklearn", reason="the SN-GAN example trains on scikit-learn's digits")
pytest.importorskip("matplotlib", reason="the SN-GAN example draws its grid with matplotlib")

from examples.sngan.model import discriminator_hinge_loss, generator_hinge_loss  # noqa: E402
from examples.sngan.spectral_norm import SpectralNorm, power_iteration  # noqa: E402
from tests.examples.test_examples import run_example  # noqa: E402

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_one_power_iteration_by_hand():
    """W = diag(3, 1), u = (1, 1)/sqrt(2): v = (3, 1)/sqrt(10), u' = (9, 1)/sqrt(82), and
    sigma = v^T W u' = 82 / sqrt(820) = sqrt(8.2)."""
    u, sigma = power_iteration(tf.constant([[3.0, 0.0], [0.0, 1.0]]),
                               tf.constant([1.0, 1.0]) / math.sqrt(2))
    np.testing.assert_allclose(u.numpy(), np.array([9.0, 1.0]) / math.sqrt(82), rtol=1e-6)
    assert float(sigma) == pytest.approx(math.sqrt(8.2), rel=1e-6)


def test_spectral_norm_converges_to_the_largest_singular_value():
    """After enough training calls the estimate is numpy's largest singular value, and the
    normalised weight's largest singular value is 1."""
    weight = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    spectral = SpectralNorm(tf.constant(weight), tf.constant([1, 2]))
    first = np.linalg.svd(spectral(update_u=True).numpy(), compute_uv=False)[0]
    for _ in range(100):
        normalised = spectral(update_u=True).numpy()
    assert first != pytest.approx(1.0, abs=1e-3)  # one iteration from a random u is not there
    assert np.linalg.svd(normalised, compute_uv=False)[0] == pytest.approx(1.0, abs=1e-4)
    _, sigma = power_iteration(spectral.weight, spectral.u)
    assert float(sigma) == pytest.approx(np.linalg.svd(weight, compute_uv=False)[0], rel=1e-4)


def test_spectral_norm_keeps_u_unless_training():
    spectral = SpectralNorm(tf.constant([[2.0, 1.0], [0.0, 1.0]]), tf.constant([3, 4]))
    before = spectral.u.numpy()
    spectral(update_u=False)
    np.testing.assert_array_equal(spectral.u.numpy(), before)
    spectral(update_u=True)
    assert not np.allclose(spectral.u.numpy(), before)
    assert spectral.trainable_variables == (spectral.weight,)


def test_hinge_losses_by_hand():
    """Real scores (2, 0.5, -1), fake (-2, 0, 0.5): D's terms are 0 + 0, 0.5 + 1, 2 + 1.5, mean
    5/3; G's loss is minus the fakes' mean, 0.5."""
    real, fake = tf.constant([2.0, 0.5, -1.0]), tf.constant([-2.0, 0.0, 0.5])
    np.testing.assert_allclose(discriminator_hinge_loss(real, fake).numpy(), [0.0, 1.5, 3.5])
    assert float(tf.reduce_mean(discriminator_hinge_loss(real, fake))) == pytest.approx(5 / 3)
    assert float(tf.reduce_mean(generator_hinge_loss(fake))) == pytest.approx(0.5)


def test_a_training_step_runs_one_power_iteration_per_weight():
    """Each of the discriminator's u after one step is one iteration from its value and its
    weight before the step (the generator scores fakes against D without moving u)."""
    from examples.sngan.trainer import SnganTrainer
    from launchpad.replicator.replicator import Replicator
    replicator = Replicator()
    with replicator.scope():
        trainer = SnganTrainer(replicator, global_batch=8, hidden=16)
    normalised = [m for m in trainer.discriminator.submodules if isinstance(m, SpectralNorm)]
    assert len(normalised) == 4  # two feature layers, the linear score, the class embedding
    expected = [power_iteration(m.weight, m.u)[0].numpy() for m in normalised]
    trainer.train(1)
    for module, u in zip(normalised, expected, strict=True):
        np.testing.assert_allclose(module.u.numpy(), u, rtol=1e-5, atol=1e-6)


def test_a_batch_the_replicas_cannot_split_is_refused_naming_the_flag():
    result = run_example("sngan", ["--batch_size=63", "--devices=2"], "local_mp", timeout=60)
    assert result.returncode != 0
    assert "--batch_size must be a multiple of the replicas" in result.stderr, result.stderr


@pytest.mark.usefixtures("no_leaked_processes")
@pytest.mark.parametrize("args, replicator", [
    ([], "one_device, 1 replica(s)"),
    (["--num_workers=2"], "sync_workers, 2 replica(s)"),
], ids=["one_device", "two_sync_workers"])
def test_the_example_trains_stops_and_writes_the_grid(tmp_path, args: list[str],
                                                      replicator: str):
    """The same trainer, one flag apart: in one process, and as two synchronous workers."""
    result = run_example("sngan", ["--steps=40", "--steps_per_call=20",
                                   f"--output_dir={tmp_path}", *args], "local_mp", timeout=120)
    report = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0, report
    assert f"driver: training SN-GAN, 178,497 parameters, <Replicator {replicator}" in (
        result.stdout), report
    assert "driver: steps 21-40: D loss " in result.stdout, report
    assert "driver: after 40 steps, " in result.stdout, report
    assert "of the generated digits are recognised as their class" in result.stdout, report
    assert f"driver: wrote the sample grid to {tmp_path / 'samples.png'}" in result.stdout, report
    assert "Program stopped cleanly." in result.stdout, report
    assert (tmp_path / "samples.png").read_bytes().startswith(PNG_SIGNATURE)
