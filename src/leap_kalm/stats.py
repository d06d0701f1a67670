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


def mean_interval(
    values: list[float], confidence: float = 0.95, clip: bool = True
) -> tuple[float, float]:
    """Student-t interval of a mean (95% by default), clipped to the values' own range
    unless ``clip`` is False (a mean of rewards in [0, 1] stays in it; a mean of paired
    differences must not be); ``(nan, nan)`` for fewer than 2 values, the value itself
    twice when they are all equal."""
    import statistics

    from scipy import stats

    n = len(values)
    if n < 2:
        return math.nan, math.nan
    mean, sd = statistics.fmean(values), statistics.stdev(values)
    if sd == 0:
        return mean, mean
    low, high = stats.t.interval(confidence, n - 1, loc=mean, scale=sd / math.sqrt(n))
    if not clip:
        return float(low), float(high)
    return max(min(values), float(low)), min(max(values), float(high))


def paired_comparison(
    baseline: dict[str, tuple[bool, float]], new: dict[str, tuple[bool, float]]
) -> dict[str, float | int]:
    """Two students on the same held-out games: how many each wins, the paired difference
    in success and in score with Student-t 95% intervals of the per-game differences, and
    McNemar's exact two-sided p-value (a binomial test on the games only one of them wins).

    Args:
        baseline: ``game_id -> (success, score)`` of the earlier student.
        new: the same for the later one; only games in both count.

    Raises:
        ValueError: If the two share no game.
    """
    from scipy import stats

    games = sorted(baseline.keys() & new.keys())
    if not games:
        raise ValueError("paired_comparison: the two evaluations share no game_id")
    won = [(bool(baseline[g][0]), bool(new[g][0])) for g in games]
    only_new = sum(n and not b for b, n in won)
    only_baseline = sum(b and not n for b, n in won)
    success = [float(n) - float(b) for b, n in won]
    score = [float(new[g][1]) - float(baseline[g][1]) for g in games]
    discordant = only_new + only_baseline
    p = stats.binomtest(only_new, discordant, 0.5).pvalue if discordant else 1.0
    success_low, success_high = mean_interval(success, clip=False)
    score_low, score_high = mean_interval(score, clip=False)
    return {
        "n": len(games),
        "won_both": sum(b and n for b, n in won),
        "won_only_new": only_new,
        "won_only_baseline": only_baseline,
        "success_delta": sum(success) / len(games),
        "success_delta_ci_low": success_low,
        "success_delta_ci_high": success_high,
        "mcnemar_p": float(p),
        "score_delta": sum(score) / len(games),
        "score_delta_ci_low": score_low,
        "score_delta_ci_high": score_high,
    }


def paired_by_split(
    baseline: dict[tuple[str, str], tuple[bool, float]],
    new: dict[tuple[str, str], tuple[bool, float]],
) -> list[dict[str, float | int | str]]:
    """:func:`paired_comparison` per held-out split, then over ``all`` the games: one row
    (with its ``split``) for each split in which the two share games; none when they
    share no game.

    Args:
        baseline: ``(split, game_id) -> (success, score)`` of the earlier student.
        new: the same for the later one.
    """
    shared = baseline.keys() & new.keys()
    splits = [*sorted({split for split, _ in shared}), "all"] if shared else []
    rows = []
    for split in splits:
        keys = [(s, g) for s, g in shared if split in ("all", s)]
        a = {f"{s}/{g}": baseline[(s, g)] for s, g in keys}
        b = {f"{s}/{g}": new[(s, g)] for s, g in keys}
        rows.append({"split": split} | paired_comparison(a, b))
    return rows
