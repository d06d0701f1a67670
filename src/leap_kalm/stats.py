"""Small statistics for reporting success rates and mean scores."""

from __future__ import annotations

import math


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (95% by default); ``(0, 1)`` for n = 0.

    Raises:
        ValueError: If ``successes`` is outside ``0..n``.
    """
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be within 0..{n}, got {successes}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def mean_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """Student-t interval of a mean (95% by default), clipped to the values' own range
    (a mean of rewards in [0, 1] stays in it); ``(nan, nan)`` for fewer than 2 values,
    the value itself twice when they are all equal."""
    import statistics

    from scipy import stats

    n = len(values)
    if n < 2:
        return math.nan, math.nan
    mean, sd = statistics.fmean(values), statistics.stdev(values)
    if sd == 0:
        return mean, mean
    low, high = stats.t.interval(confidence, n - 1, loc=mean, scale=sd / math.sqrt(n))
    return max(min(values), float(low)), min(max(values), float(high))
