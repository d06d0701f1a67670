"""KALM's evaluation: each d3rlpy policy plays every goal level of its world in the real env."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from leap_kalm.envs.registry import get_world
from leap_kalm.schemas import ConfigMixin
from leap_kalm.training.offline_rl import NotTrained

logger = logging.getLogger(__name__)

KALM_SUMMARY_COLUMNS = ["env", "policy", "level", "success_rate", "ci_low", "ci_high", "n"]


@dataclass
class KalmEvaluationParams(ConfigMixin):
    """How KALM policies are evaluated (``<world>.kalm_evaluation``).

    Attributes:
        n_per_level: Episodes per goal level (KALM's levels: real, rephrase, easy, hard).
        levels: Levels evaluated (``null``: all the world's ``EVALUATION_LEVELS``).
        seed: Episode ``i`` of a level starts from ``reset(seed=seed + i)``; keep it apart
            from the ingest and imagination seeds.
    """

    n_per_level: int = 100
    levels: list[str] | None = None
    seed: int = 20_000


def evaluate_kalm_policies(
    kalm_params: dict[str, Any],
    world: str,
    policy_levels: dict[str, list[str]] | None = None,
    **policies: Any,
) -> tuple[Any, Any]:
    """Success per policy and level with Wilson 95% intervals, computed with polars from
    the table of evaluation episodes.

    Args:
        kalm_params: ``KalmEvaluationParams`` as a mapping.
        world: The KALM world.
        policy_levels: The levels a policy plays, by name, where not all of them: a
            per-level policy (``kalm_rephrase``) plays ``real`` and its own level.
        **policies: Fitted d3rlpy algorithms by name (``real``, ``kalm``, ``kalm_<level>``);
            a ``NotTrained`` one, or one trained on another observation layout, is
            reported with n = 0.

    Returns:
        The summary (pandas, columns ``KALM_SUMMARY_COLUMNS``) and the episodes (polars,
        ``leap_kalm.tables.KALM_EPISODE_COLUMNS``).
    """
    import pandas as pd

    from leap_kalm.llm.encoder import InstructionEncoder
    from leap_kalm.tables import kalm_episode_table, kalm_summary
    from leap_kalm.training.offline_rl import evaluate_policy

    config = KalmEvaluationParams.from_dict(kalm_params)
    module = get_world(world, "kalm")
    levels = config.levels or list(module.EVALUATION_LEVELS)
    unknown = sorted(set(levels) - set(module.EVALUATION_LEVELS))
    if unknown:
        raise ValueError(
            f"{world} has no evaluation levels {unknown}; it has {list(module.EVALUATION_LEVELS)}"
        )
    encoder = InstructionEncoder()
    episodes: list[dict[str, Any]] = []
    expected = module.make_env(levels[0]).reset(seed=config.seed)[0].shape[-1] + encoder.dim
    for name, algo in policies.items():
        if isinstance(algo, NotTrained):
            logger.warning("%s %s policy is not evaluated: %s", world, name, algo.reason)
            continue
        observation_size = _observation_size(algo)
        if observation_size != expected:
            logger.warning(
                "%s %s policy sees %d numbers, the env gives %d (state + instruction): it was "
                "trained on another observation layout (KALM's own files?) and is not evaluated here",
                world, name, observation_size, expected,
            )  # fmt: skip
            continue
        for level in _levels_of(name, levels, policy_levels):
            success = evaluate_policy(
                algo,
                lambda level=level: module.make_env(level),
                config.n_per_level,
                config.seed,
                encoder.encode,
            )
            episodes += [
                {"env": world, "policy": name, "level": level, "episode": i,
                 "seed": config.seed + i, "success": bool(won)}
                for i, won in enumerate(success)
            ]  # fmt: skip
            logger.info(
                "%s %s policy, %s goals: %d/%d", world, name, level, sum(success), len(success)
            )
    table = kalm_episode_table(episodes)
    order = [
        (name, level) for name in policies for level in _levels_of(name, levels, policy_levels)
    ]
    summary = pd.DataFrame([{"env": world, **row} for row in kalm_summary(table, order)])
    return summary[KALM_SUMMARY_COLUMNS], table


def _levels_of(
    name: str, levels: list[str], policy_levels: dict[str, list[str]] | None
) -> list[str]:
    """The evaluated levels that policy ``name`` plays, in the evaluation's order."""
    own = (policy_levels or {}).get(name)
    return levels if own is None else [level for level in levels if level in own]


def plot_kalm_evaluation(kalm_eval_summary: Any, world: str) -> Any:
    """Success per level with 95% intervals: real data only, real + every level's imagined
    data (``kalm``), and real + the level's own imagined data (``kalm_<level>`` on its
    level: KALM's comparison), as grouped bars."""
    from leap_kalm.plots import grouped_bars

    series: dict[str, dict[str, tuple[float, float, float]]] = {}
    labels = {"real": "real data only", "kalm": "real + imagined (all levels)"}
    for row in kalm_eval_summary.to_dict("records"):
        if not row["n"]:
            continue
        name = str(row["policy"])
        if name.startswith("kalm_"):
            if name != f"kalm_{row['level']}":
                continue  # a per-level policy's real-goal check: in the table, not the plot
            name = "kalm_own"
        label = labels.get(name, "real + the level's own imagined data")
        series.setdefault(label, {})[str(row["level"])] = (
            row["success_rate"],
            row["ci_low"],
            row["ci_high"],
        )
    levels = list(dict.fromkeys(str(level) for level in kalm_eval_summary["level"]))
    return grouped_bars(series, levels, f"{world}: success per goal level (95% intervals)")


def _observation_size(algo: Any) -> int:
    """How many numbers a fitted d3rlpy policy observes."""
    shape = algo.impl.observation_shape
    return int(shape[0] if isinstance(shape, (tuple, list)) else shape)
