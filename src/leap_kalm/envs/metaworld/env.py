"""``MetaWorldTaskEnv``: one Meta-World v3 task behind a plain gymnasium API.

How metaworld 3.1.1 builds a single task (read from the installed package):
``metaworld.env_dict.ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE[f"{name}-goal-observable"]``
is a class whose constructor resets once and then *freezes* the random object/goal
placement. ``gymnasium.make("Meta-World/MT1", env_name=...)`` instead wraps the env in
TimeLimit, auto-terminate, statistics and a random-task wrapper that draws from 50
pre-sampled placements. Here the goal-observable class is used with the freeze
lifted and ``seeded_rand_vec`` on, so that every reset draws a fresh placement from
the inner env's generator, which is reseeded from this env's ``np_random`` on each
reset: randomness comes only from ``self.np_random`` and ``reset(seed=s)`` is
reproducible.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from leap_kalm.envs.metaworld.tasks import instructions_for, v3_name

OBS_DIM = 39
ACTION_DIM = 4


class MetaWorldTaskEnv(gym.Env):
    """A single Meta-World v3 task: 39-d float32 observation, 4-d action in [-1, 1].

    Args:
        task: v3 name (``"push-v3"``) or KALM name (``"push"``).
        level: Which instruction set ``info["instruction"]`` comes from.
        max_episode_steps: Truncation horizon (Meta-World's own limit is 500).
        terminate_on_success: End the episode on the first ``info["success"]``.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        task: str,
        level: str = "real",
        max_episode_steps: int = 150,
        terminate_on_success: bool = True,
        render_mode: str | None = None,
    ) -> None:
        from metaworld.env_dict import ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE

        if render_mode is not None:
            raise ValueError("MetaWorldTaskEnv is state-only and does not render")
        self.task = task if task.endswith("-v3") else v3_name(task)
        key = f"{self.task}-goal-observable"
        if key not in ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE:
            raise KeyError(f"{self.task!r} is not a Meta-World v3 task")
        self.level = level
        self.instructions = instructions_for(self.task, level)
        self.max_episode_steps = int(max_episode_steps)
        if not 0 < self.max_episode_steps <= 500:
            raise ValueError("max_episode_steps must be in 1..500 (Meta-World's path length)")
        self.terminate_on_success = terminate_on_success
        self.render_mode = None
        self._env = ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE[key](seed=0)
        self._env._freeze_rand_vec = False
        self._env.seeded_rand_vec = True
        inner = self._env.observation_space
        low = np.where(np.isfinite(inner.low), inner.low, -np.inf).astype(np.float32)
        high = np.where(np.isfinite(inner.high), inner.high, np.inf).astype(np.float32)
        low[-3:], high[-3:] = (
            -np.inf,
            np.inf,
        )  # the goal-observable class declares the goal as [0, 0]
        self.observation_space = spaces.Box(low, high, shape=(OBS_DIM,), dtype=np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(ACTION_DIM,), dtype=np.float32)
        self._steps = 0
        self._instruction = self.instructions[0]

    @property
    def unwrapped_metaworld(self) -> Any:
        """The underlying metaworld env (for its scripted policy's needs)."""
        return self._env

    @property
    def goal(self) -> np.ndarray:
        """Goal position (3,) of the current episode."""
        return np.asarray(self._env._target_pos, dtype=np.float32).copy()

    def _obs(self, obs: np.ndarray) -> np.ndarray:
        return np.asarray(obs, dtype=np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._env.seed(int(self.np_random.integers(2**31 - 1)))
        obs, _ = self._env.reset()
        self._steps = 0
        options = options or {}
        self._instruction = str(
            options.get("instruction")
            or self.instructions[int(self.np_random.integers(len(self.instructions)))]
        )
        return self._obs(obs), {
            "task": self.task,
            "instruction": self._instruction,
            "goal": self.goal,
            "success": False,
        }

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        a = np.clip(np.asarray(action, dtype=np.float32).reshape(ACTION_DIM), -1.0, 1.0)
        obs, reward, _, inner_truncated, info = self._env.step(a)
        self._steps += 1
        success = bool(info.get("success", 0.0))
        terminated = bool(success and self.terminate_on_success)
        truncated = bool(
            not terminated and (self._steps >= self.max_episode_steps or inner_truncated)
        )
        out = {k: v for k, v in info.items() if k != "success"}
        out.update(success=success, task=self.task, instruction=self._instruction, goal=self.goal)
        return self._obs(obs), float(reward), terminated, truncated, out
