"""Meta-World offline data in KALM's format: the scripted experts with noise."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from leap_kalm.envs.collect import (
    Episode,
    EpisodeFactory,
    Rollouts,
    _noise_levels,
    collect_episodes,
)
from leap_kalm.envs.metaworld.env import ACTION_DIM, OBS_DIM, MetaWorldTaskEnv
from leap_kalm.envs.metaworld.policy import ScriptedMetaWorldPolicy

logger = logging.getLogger(__name__)

DEFAULT_METAWORLD_NOISE: tuple[float, ...] = (0.0, 0.1, 0.3, 0.6, 0.9)


def _episodes(
    tasks: Sequence[str],
    n_per_task: int,
    level: str,
    horizon: int,
    noise_std: float,
    n_instructions: int,
) -> EpisodeFactory:
    """``n_per_task`` episodes per task, in task order; per episode the rng draws the
    policy's seed, the placement's seed and the instructions, in that order."""

    def episodes(rng: np.random.Generator, eps_noise: np.ndarray) -> Iterator[Episode]:
        for k, task in enumerate(tasks):
            env = MetaWorldTaskEnv(task, level=level, max_episode_steps=horizon)
            pool = env.instructions
            for p in eps_noise[k * n_per_task : (k + 1) * n_per_task]:
                policy = ScriptedMetaWorldPolicy(
                    env.task,
                    noise_std=noise_std,
                    random_action_prob=float(p),
                    seed=int(rng.integers(2**31 - 1)),
                )
                obs, info = env.reset(seed=int(rng.integers(2**31 - 1)))
                picks = rng.choice(
                    len(pool), size=n_instructions, replace=n_instructions > len(pool)
                )
                yield Episode(env, policy, obs, info["goal"], [pool[j] for j in picks], env.task)

    return episodes


def _metadata(
    rollouts: Rollouts,
    tasks: Sequence[str],
    level: str,
    seed: int,
    levels: np.ndarray,
    noise_std: float,
    horizon: int,
) -> dict[str, Any]:
    """KALM's metadata keys, per-episode task names, success and noise, and the settings."""
    return {
        "num_trajectories": len(rollouts.success),
        "observation_type": "continuous",
        "observation_dim": OBS_DIM,
        "action_type": "continuous",
        "action_dim": ACTION_DIM,
        "env_names": np.array(rollouts.names),
        "level": level,
        "success": rollouts.success,
        "noise": rollouts.noise,
        "generator": {
            "env": "metaworld-v3",
            "policy": "metaworld.policies + noise",
            "seed": int(seed),
            "noise_levels": levels.tolist(),
            "noise_std": float(noise_std),
            "horizon": int(horizon),
            "level": level,
            "tasks": [str(t) for t in tasks],
        },
    }


def generate_metaworld_dataset(
    tasks: Sequence[str],
    n_per_task: int,
    seed: int,
    level: str = "real",
    horizon: int = 150,
    noise: float | Sequence[float] = DEFAULT_METAWORLD_NOISE,
    noise_std: float = 0.1,
    n_instructions: int = 3,
    progress: bool = True,
) -> dict[str, Any]:
    """Roll out Meta-World's scripted experts (plus Gaussian noise) into KALM's arrays.

    Args:
        tasks: v3 or KALM task names.
        n_per_task: Episodes per task; ``N = len(tasks) * n_per_task``.
        seed: Seeds placements, instructions, noise levels and the policies.
        level: Instruction set (``"real"`` train wordings, ``"rephrase"`` held-out ...).
        horizon: ``T``; an episode ends early on success.
        noise: Probability of a uniformly random action per step; a list draws one
            level per episode (the default mixes clean and very noisy episodes, so
            both successes and failures are present).
        noise_std: Std of Gaussian noise added to the expert's actions.
        n_instructions: ``K`` instructions per episode (drawn with replacement when a
            task has fewer).
        progress: ``False`` hides the progress bar (``True`` shows it unless ``CI`` or
            ``LEAP_KALM_PROGRESS=0`` is set).

    Returns:
        KALM's arrays (``actions`` float32 (N, T, 4), ``goals`` the 3-d goal
        position) plus ``env_names`` (N,), ``success`` (N,), ``noise`` (N,) and metadata.
    """
    if not tasks or n_per_task < 1 or horizon < 1:
        raise ValueError("need at least one task, n_per_task >= 1 and horizon >= 1")
    levels = _noise_levels(noise, "Meta-World")
    n = len(tasks) * n_per_task
    rollouts = collect_episodes(
        _episodes(tasks, n_per_task, level, horizon, noise_std, n_instructions),
        n=n,
        horizon=horizon,
        obs_dim=OBS_DIM,
        goal_dim=3,
        action_dim=ACTION_DIM,
        levels=levels,
        rng=np.random.default_rng(seed),
        description="Meta-World episodes",
        progress=progress,
    )
    rate = rollouts.success.mean()
    logger.info("Meta-World: %d episodes over %d tasks, success rate %.3f", n, len(tasks), rate)
    return {
        **rollouts.arrays,
        **_metadata(rollouts, tasks, level, seed, levels, noise_std, horizon),
    }
