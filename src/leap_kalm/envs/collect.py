"""Roll scripted policies (with noise) into KALM's offline arrays: the loop every world shares.

A world's collector (``leap_kalm.envs.<world>.data``) builds its environments and
policies and hands :func:`collect_episodes` an ``episodes`` factory; the loop draws
each episode's noise level, records the episodes into the arrays of the KALM
format (see :mod:`leap_kalm.envs.kalm_format`) and shows a progress bar. The
world then adds its metadata (``num_trajectories``, ``observation_dim`` ...,
``success``, ``noise`` and the generator's settings).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from leap_kalm.progress import track


@dataclass
class Episode:
    """One episode, ready to play: the env just reset and the policy for it.

    Attributes:
        env: Gymnasium-style env; ``step`` returns an info dict with ``success``.
        act: Maps an observation to the action to take.
        obs: The observation ``env.reset`` returned.
        goal: The goal vector, repeated over the episode's ``T`` steps.
        instructions: The ``K`` instructions of the episode.
        name: The task's name, when the world records one per episode.
    """

    env: Any
    act: Callable[[np.ndarray], Any]
    obs: np.ndarray
    goal: np.ndarray
    instructions: list[str]
    name: str | None = None


EpisodeFactory = Callable[[np.random.Generator, np.ndarray], Iterable[Episode]]
"""Given the collector's rng and the episodes' noise levels, yields the episodes in order."""


@dataclass
class Rollouts:
    """What :func:`collect_episodes` recorded.

    Attributes:
        arrays: KALM's arrays (``observations`` ... ``goals``, then ``instructions``).
        success: Whether each episode succeeded, (N,) bool.
        noise: Each episode's noise level, (N,) float32.
        names: The episodes' :attr:`Episode.name`, for those that have one.
    """

    arrays: dict[str, np.ndarray]
    success: np.ndarray
    noise: np.ndarray
    names: list[str] = field(default_factory=list)


def _noise_levels(noise: float | Sequence[float], label: str | None = None) -> np.ndarray:
    """``noise`` as a 1-d array of non-negative levels (probabilities <= 1 with ``label``)."""
    levels = np.atleast_1d(np.asarray(noise, dtype=np.float64))
    if levels.size == 0 or np.any(levels < 0):
        raise ValueError(
            f"noise must be a non-negative number or a non-empty list of them, got {noise!r}"
        )
    if label is not None and np.any(levels > 1):
        raise ValueError(f"{label} noise is a probability and must be <= 1")
    return levels


def _empty_arrays(
    n: int, horizon: int, obs_dim: int, goal_dim: int, action_dim: int | None
) -> dict[str, np.ndarray]:
    """Zeroed KALM arrays; ``action_dim=None`` means discrete (N, T) int32 actions."""
    actions = (
        np.zeros((n, horizon), dtype=np.int32)
        if action_dim is None
        else np.zeros((n, horizon, action_dim), dtype=np.float32)
    )
    return {
        "observations": np.zeros((n, horizon, obs_dim), dtype=np.float32),
        "next_observations": np.zeros((n, horizon, obs_dim), dtype=np.float32),
        "actions": actions,
        "rewards": np.zeros((n, horizon, 1), dtype=np.float32),
        "terminals": np.zeros((n, horizon, 1), dtype=bool),
        "masks": np.zeros((n, horizon), dtype=np.int32),
        "goals": np.zeros((n, horizon, goal_dim), dtype=np.float32),
    }


def _record_episode(
    env: Any, act: Any, obs: np.ndarray, out: dict[str, np.ndarray], i: int, horizon: int
) -> bool:
    """Play one episode from ``obs`` into row ``i`` of KALM's arrays; return whether it succeeded."""
    for t in range(horizon):
        action = act(obs)
        next_obs, reward, terminated, truncated, step_info = env.step(action)
        out["observations"][i, t] = obs
        out["next_observations"][i, t] = next_obs
        out["actions"][i, t] = action
        out["rewards"][i, t, 0] = reward
        out["terminals"][i, t, 0] = bool(step_info["success"])
        out["masks"][i, t] = 1
        obs = next_obs
        if terminated or truncated:
            return bool(step_info["success"])
    return False


def _as_str_array(rows: list[list[str]]) -> np.ndarray:
    """Rows of strings as a fixed-width unicode array (at least ``<U1``)."""
    width = max((len(s) for row in rows for s in row), default=1)
    return np.array(rows, dtype=f"<U{max(width, 1)}")


def collect_episodes(
    episodes: EpisodeFactory,
    *,
    n: int,
    horizon: int,
    obs_dim: int,
    goal_dim: int,
    action_dim: int | None,
    levels: np.ndarray,
    rng: np.random.Generator,
    description: str,
    progress: bool = True,
) -> Rollouts:
    """Draw a noise level per episode, play the episodes and record them into KALM's arrays.

    Args:
        episodes: Given ``rng`` (after the noise levels are drawn from it) and the ``n``
            noise levels, yields the ``n`` episodes in order, each one built (policy,
            env reset, instructions) only once the previous one has been played.
        n: Number of episodes ``N``.
        horizon: ``T``; an episode ends early when its env terminates or truncates.
        obs_dim: Observation size ``D``.
        goal_dim: Goal size ``G``.
        action_dim: Continuous action size ``A``; ``None`` for discrete actions.
        levels: Noise levels an episode draws from (see :func:`_noise_levels`).
        rng: The collector's generator; the noise levels are its first draw.
        description: The progress bar's label.
        progress: ``False`` turns the progress bar off; ``True`` leaves it to
            :func:`leap_kalm.progress.track` (off in CI or with ``LEAP_KALM_PROGRESS=0``).

    Returns:
        The arrays, per-episode success and noise levels, and the episodes' names.
    """
    out = _empty_arrays(n, horizon, obs_dim, goal_dim, action_dim)
    eps_noise = rng.choice(levels, size=n)
    success = np.zeros(n, dtype=bool)
    instructions: list[list[str]] = []
    names: list[str] = []
    stream: Iterable[Episode] = episodes(rng, eps_noise)
    if progress:
        stream = track(stream, description, total=n)
    for i, episode in enumerate(stream):
        out["goals"][i] = episode.goal
        instructions.append(episode.instructions)
        if episode.name is not None:
            names.append(episode.name)
        success[i] = _record_episode(episode.env, episode.act, episode.obs, out, i, horizon)
    out["instructions"] = _as_str_array(instructions)
    return Rollouts(out, success, eps_noise.astype(np.float32), names)
