"""Log-linear latency buckets (HdrHistogram's scheme): exact enough to act on, cheap to keep.

A duration is counted in units of 1/16 us. The first 32 buckets are one unit wide (up to
2 us); above, each power of two is cut into 16 buckets of equal width, so a bucket is never
wider than 1/16 of its lower bound. A percentile reads as the middle of the bucket its rank
falls in: within 1/32 (3.1%) of the true duration, from 1 us to `MAX_SECS` (about 71
minutes; slower calls share the last bucket, read as its lower bound). Counts are kept
sparse, `{bucket: count}`: a method's calls fill a few dozen of the buckets, so histograms
stay small to send every report, and sum (processes, nodes) by adding counts per bucket.

Prometheus takes them as classic histograms whose `le` bounds are the upper bounds of the
buckets that hold calls: counts only grow, so a bound once exported stays (exporter.py).
"""

from __future__ import annotations

from collections.abc import Mapping

SUB_BUCKETS = 16  # per power of two
_SHIFT = 4  # log2(SUB_BUCKETS)
UNITS_PER_SEC = 16e6  # a unit is 1/16 us
_TOP_EXPONENT = 32  # the last bucket starts at 2**36 units
LAST_BUCKET = (_TOP_EXPONENT + 1) * SUB_BUCKETS  # its index; every index is in [0, LAST]
MAX_SECS = (1 << (_TOP_EXPONENT + _SHIFT)) / UNITS_PER_SEC


def bucket_of(secs: float) -> int:
    """The bucket a duration of `secs` falls in."""
    units = int(secs * UNITS_PER_SEC)
    if units < 2 * SUB_BUCKETS:
        return units if units > 0 else 0  # (no max() and min(): a call's cost counts here)
    exponent = units.bit_length() - _SHIFT - 1  # units >> exponent is in [16, 32)
    bucket = ((exponent + 1) << _SHIFT) + (units >> exponent) - SUB_BUCKETS
    return bucket if bucket < LAST_BUCKET else LAST_BUCKET


def bounds_of(bucket: int) -> tuple[float, float]:
    """The durations bucket `bucket` holds, [lower, upper) in seconds (the last one's upper
    bound is infinite)."""
    if bucket < 2 * SUB_BUCKETS:
        return bucket / UNITS_PER_SEC, (bucket + 1) / UNITS_PER_SEC
    exponent = (bucket >> _SHIFT) - 1
    mantissa = (bucket & (SUB_BUCKETS - 1)) + SUB_BUCKETS
    upper = float("inf") if bucket == LAST_BUCKET else ((mantissa + 1) << exponent)
    return (mantissa << exponent) / UNITS_PER_SEC, upper / UNITS_PER_SEC


def percentile(buckets: Mapping[int, int], fraction: float) -> float | None:
    """The duration under which `fraction` of the counted calls took, in seconds (the middle
    of its bucket; see the module doc); None without calls.

    Raises:
      ValueError: `fraction` is not in (0, 1].
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    counted = sum(buckets.values())
    if not counted:
        return None
    wanted = fraction * counted
    seen = 0
    for bucket in sorted(buckets):
        seen += buckets[bucket]
        if seen >= wanted:
            break
    lower, upper = bounds_of(bucket)
    return lower if bucket == LAST_BUCKET else (lower + upper) / 2


def is_valid(buckets: object, bound: int) -> bool:
    """Whether `buckets` is a sparse histogram: bucket indices to counts below `bound`."""
    return (isinstance(buckets, dict) and len(buckets) <= LAST_BUCKET + 1
            and all(type(b) is int and 0 <= b <= LAST_BUCKET and type(c) is int
                    and 0 <= c < bound for b, c in buckets.items()))
