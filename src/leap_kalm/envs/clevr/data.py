"""CLEVR-Robot offline data in KALM's format: the scripted pusher with noise."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from leap_kalm.envs.clevr.env import ClevrRobotEnv
from leap_kalm.envs.clevr.goals import goal_dim
from leap_kalm.envs.clevr.physics import N_ACTIONS, N_BALLS
from leap_kalm.envs.clevr.policy import ScriptedClevrPolicy
from leap_kalm.envs.collect import (
    Episode,
    EpisodeFactory,
    Rollouts,
    _noise_levels,
    collect_episodes,
)

logger = logging.getLogger(__name__)

DEFAULT_CLEVR_NOISE: tuple[float, ...] = (0.0, 0.1, 0.3, 0.6, 1.0)


def _episodes(env: ClevrRobotEnv, level: str, n_episodes: int) -> EpisodeFactory:
    """Scenes and policies seeded from the rng's next two draws (one seed per episode each)."""

    def episodes(rng: np.random.Generator, eps_noise: np.ndarray) -> Iterator[Episode]:
        env_seeds = rng.integers(2**31 - 1, size=n_episodes)
        policy_seeds = rng.integers(2**31 - 1, size=n_episodes)
        for i, p in enumerate(eps_noise):
            obs, info = env.reset(seed=int(env_seeds[i]))
            policy = ScriptedClevrPolicy(level, noise=float(p), seed=int(policy_seeds[i]))
            goal = info["goal"]

            def act(o: np.ndarray, policy=policy, goal=goal) -> int:
                return policy(o, goal)

            yield Episode(env, act, obs, goal, info["instructions"])

    return episodes


def _metadata(
    rollouts: Rollouts, level: str, seed: int, levels: np.ndarray, horizon: int
) -> dict[str, Any]:
    """KALM's metadata keys, per-episode success and noise, and the generator's settings."""
    return {
        "num_trajectories": len(rollouts.success),
        "observation_type": "continuous",
        "observation_dim": 2 * N_BALLS,
        "action_type": "discrete",
        "action_dim": N_ACTIONS,
        "number_of_objects": N_BALLS,
        "level": level,
        "success": rollouts.success,
        "noise": rollouts.noise,
        "generator": {
            "env": "clevr_robot",
            "policy": "ScriptedClevrPolicy",
            "seed": int(seed),
            "noise_levels": levels.tolist(),
            "horizon": int(horizon),
            "level": level,
        },
    }


def generate_clevr_dataset(
    n_episodes: int,
    seed: int,
    level: str = "real",
    horizon: int = 50,
    noise: float | Sequence[float] = DEFAULT_CLEVR_NOISE,
    n_instructions: int = 20,
    progress: bool = True,
) -> dict[str, Any]:
    """Roll out the scripted CLEVR-Robot policy (plus noise) into KALM's arrays.

    Args:
        n_episodes: Number of episodes ``N``.
        seed: Seeds scenes, goals, instructions, noise levels and the policy.
        level: ``"real"``, ``"rephrase"``, ``"easy"`` or ``"hard"``.
        horizon: ``T``; easy episodes last one step and are padded to ``T``.
        noise: Probability of a random action; a list draws one level per episode
            (the default mixes clean and very noisy episodes, so both successes and
            failures are present).
        n_instructions: ``K`` paraphrases per episode.
        progress: ``False`` hides the progress bar (``True`` shows it unless ``CI`` or
            ``LEAP_KALM_PROGRESS=0`` is set).

    Returns:
        KALM's arrays (``actions`` int32 (N, T)) plus metadata, ``success`` (N,) and
        ``noise`` (N,).
    """
    if n_episodes < 1 or horizon < 1:
        raise ValueError("n_episodes and horizon must be positive")
    levels = _noise_levels(noise, "CLEVR")
    env = ClevrRobotEnv(level=level, max_episode_steps=horizon, n_instructions=n_instructions)
    rollouts = collect_episodes(
        _episodes(env, level, n_episodes),
        n=n_episodes,
        horizon=horizon,
        obs_dim=2 * N_BALLS,
        goal_dim=goal_dim(level),
        action_dim=None,
        levels=levels,
        rng=np.random.default_rng(seed),
        description=f"CLEVR {level} episodes",
        progress=progress,
    )
    rate = rollouts.success.mean()
    logger.info("CLEVR %s: %d episodes, success rate %.3f", level, n_episodes, rate)
    return {**rollouts.arrays, **_metadata(rollouts, level, seed, levels, horizon)}
