"""KALM's evaluation: each d3rlpy policy plays every goal level of its world in the real env."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from leap_kalm.envs.registry import get_world
from leap_kalm.schemas import ConfigMixin

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


def evaluate_kalm_policies(kalm_params: dict[str, Any], world: str, **policies: Any) -> Any:
    """Success per policy and level with Wilson 95% intervals, as a table.

    Args:
        kalm_params: ``KalmEvaluationParams`` as a mapping.
        world: The KALM world.
        **policies: Fitted d3rlpy algorithms by name (``real``, ``kalm``).
    """
    import pandas as pd

    from leap_kalm.llm.encoder import InstructionEncoder
    from leap_kalm.stats import wilson_interval
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
    rows = []
    for name, algo in policies.items():
        observation_size = _observation_size(algo)
        expected = module.make_env(levels[0]).reset(seed=config.seed)[0].shape[-1] + encoder.dim
        if observation_size != expected:
            logger.warning(
                "%s %s policy sees %d numbers, the env gives %d (state + instruction): it was "
                "trained on another observation layout (KALM's own files?) and is not evaluated here",
                world, name, observation_size, expected,
            )  # fmt: skip
            rows += [
                [world, name, level, float("nan"), float("nan"), float("nan"), 0]
                for level in levels
            ]
            continue
        for level in levels:
            success = evaluate_policy(
                algo,
                lambda level=level: module.make_env(level),
                config.n_per_level,
                config.seed,
                encoder.encode,
            )
            won = sum(success)
            low, high = wilson_interval(won, len(success))
            rows.append([world, name, level, won / len(success), low, high, len(success)])
            logger.info("%s %s policy, %s goals: %d/%d", world, name, level, won, len(success))
    return pd.DataFrame(rows, columns=KALM_SUMMARY_COLUMNS)


def _observation_size(algo: Any) -> int:
    """How many numbers a fitted d3rlpy policy observes."""
    shape = algo.impl.observation_shape
    return int(shape[0] if isinstance(shape, (tuple, list)) else shape)
