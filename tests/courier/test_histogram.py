"""The latency histogram (_histogram.py): known distributions recorded, their percentiles read
back within 5% of numpy's on the raw samples, from 1 us to 60 s; buckets that tile the
durations without gaps; sums of histograms that are the histogram of the sums."""

from __future__ import annotations

import numpy as np
import pytest

from launchpad.courier import _histogram, metrics

FRACTIONS = (0.5, 0.9, 0.99)
_RNG = np.random.default_rng(20261204)

DISTRIBUTIONS = {
    "uniform 1-10 us": _RNG.uniform(1e-6, 10e-6, 50_000),
    "uniform 0.1-60 s": _RNG.uniform(0.1, 60.0, 50_000),
    "bimodal 40 us / 8 ms": np.concatenate([_RNG.normal(40e-6, 4e-6, 30_000),
                                            _RNG.normal(8e-3, 1e-3, 20_000)]),
    "log-normal around 1 ms": _RNG.lognormal(np.log(1e-3), 1.0, 50_000),
    "pareto tail from 20 us": 20e-6 * (1 + _RNG.pareto(1.5, 50_000)),
    "one value, 1.00 ms": np.full(1000, 1e-3),
}


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_percentiles_are_within_5_percent_of_the_samples(name):
    samples = np.clip(DISTRIBUTIONS[name], 1e-6, 60.0)
    counter = metrics.CallMetrics()
    for secs in samples:
        counter.record("m", float(secs), False)
    counts = counter.snapshot()["m"]
    for fraction in FRACTIONS:
        true = float(np.percentile(samples, 100 * fraction))
        assert counts.percentile(fraction) == pytest.approx(true, rel=0.05), (name, fraction)


def test_every_duration_lands_in_a_bucket_whose_bounds_hold_it():
    for secs in np.geomspace(1e-7, 4000.0, 20_000):
        bucket = _histogram.bucket_of(float(secs))
        lower, upper = _histogram.bounds_of(bucket)
        assert lower <= secs * (1 + 1e-12) and secs < upper * (1 + 1e-12), (secs, bucket)
        if secs >= 1e-6:
            assert (upper - lower) / lower <= 1 / _histogram.SUB_BUCKETS + 1e-12


def test_buckets_tile_the_durations_from_zero_to_the_last():
    previous_upper = 0.0
    for bucket in range(_histogram.LAST_BUCKET + 1):
        lower, upper = _histogram.bounds_of(bucket)
        assert lower == pytest.approx(previous_upper, rel=1e-12, abs=1e-15) and upper > lower
        previous_upper = upper
    assert previous_upper == float("inf")
    assert _histogram.bucket_of(1e9) == _histogram.LAST_BUCKET
    assert _histogram.bucket_of(-1.0) == 0


def test_summed_histograms_read_as_one_of_every_sample():
    samples = DISTRIBUTIONS["log-normal around 1 ms"]
    halves = metrics.CallMetrics(), metrics.CallMetrics()
    whole = metrics.CallMetrics()
    for i, secs in enumerate(samples[:5000]):
        halves[i % 2].record("m", float(secs), False)
        whole.record("m", float(secs), False)
    summed = metrics.summed([halves[0].snapshot(), halves[1].snapshot()])["m"]
    assert summed.buckets == whole.snapshot()["m"].buckets
    assert all(isinstance(bucket, int) for bucket in summed.buckets)


def test_a_histogram_is_refused_unless_it_is_buckets_to_counts():
    assert _histogram.is_valid({0: 1, _histogram.LAST_BUCKET: 2}, 1 << 63)
    for bad in ([1, 2], {_histogram.LAST_BUCKET + 1: 1}, {-1: 1}, {0: -1}, {"0": 1}, {0: 1.5},
                {True: 1}):
        assert not _histogram.is_valid(bad, 1 << 63), bad
