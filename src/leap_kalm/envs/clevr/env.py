"""``ClevrRobotEnv``: CLEVR-Robot with language goals at KALM's four levels (gymnasium API)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from leap_kalm.envs.clevr import goals as G
from leap_kalm.envs.clevr.instructions import sample_instructions
from leap_kalm.envs.clevr.physics import (
    N_ACTIONS,
    N_BALLS,
    REACHABLE_X,
    REACHABLE_Y,
    ClevrPhysics,
)

OBS_LOW = np.tile([REACHABLE_X[0] - 0.05, REACHABLE_Y[0] - 0.05], N_BALLS).astype(np.float32)
OBS_HIGH = np.tile([REACHABLE_X[1] + 0.05, REACHABLE_Y[1] + 0.05], N_BALLS).astype(np.float32)


class ClevrRobotEnv(gym.Env):
    """Five balls on a table; push one of them in one of eight directions per step.

    Observation: float32 (10,) = (x, y) of red, blue, green, purple, cyan.
    Action: ``Discrete(40)``: ball ``a // 8`` pushed in direction ``a % 8`` (see
    :mod:`leap_kalm.envs.clevr.physics`).

    Each episode has a goal at ``level`` (``"real"``, ``"rephrase"``, ``"easy"``,
    ``"hard"``; see :mod:`leap_kalm.envs.clevr.goals`) and paraphrased instructions.
    The episode terminates on success (easy: after its single step) and is truncated
    after ``max_episode_steps``.

    ``reset(options=...)`` accepts ``positions`` (10,) to place the balls (they are
    settled by the physics first), ``goal`` (a goal vector of the level) and
    ``instruction`` (a string to report instead of a sampled one).

    ``info`` carries ``goal``, ``instruction``, ``instructions`` (``n_instructions``
    paraphrases), ``level``, ``success`` and, after a step, ``progress``.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        level: str = "real",
        max_episode_steps: int = 50,
        n_instructions: int = 1,
        render_mode: str | None = None,
    ) -> None:
        if level not in G.LEVELS:
            raise ValueError(f"unknown CLEVR level {level!r}; expected one of {G.LEVELS}")
        if render_mode is not None:
            raise ValueError("ClevrRobotEnv is state-only and does not render")
        self.level = level
        self.max_episode_steps = 1 if level == "easy" else int(max_episode_steps)
        self.n_instructions = int(n_instructions)
        self.render_mode = None
        self.observation_space = spaces.Box(
            OBS_LOW, OBS_HIGH, shape=(2 * N_BALLS,), dtype=np.float32
        )
        self.action_space = spaces.Discrete(N_ACTIONS)
        self.goal_dim = G.goal_dim(level)
        self._physics = ClevrPhysics()
        self._positions = np.zeros(2 * N_BALLS)
        self._goal = np.zeros(self.goal_dim, dtype=np.float32)
        self._instructions: list[str] = []
        self._steps = 0

    # ------------------------------------------------------------------ helpers
    @property
    def positions(self) -> np.ndarray:
        """Current ball positions, float64 (10,)."""
        return self._positions.copy()

    @property
    def goal(self) -> np.ndarray:
        return self._goal.copy()

    def simulate(self, positions: np.ndarray, action: int) -> np.ndarray:
        """Next positions after ``action`` from ``positions``; does not touch the episode."""
        return self._physics.push(np.asarray(positions, dtype=np.float64), int(action))

    def _obs(self) -> np.ndarray:
        return np.clip(self._positions, OBS_LOW, OBS_HIGH).astype(np.float32)

    def _info(self, success: bool) -> dict[str, Any]:
        return {
            "goal": self._goal.copy(),
            "instruction": self._instructions[0] if self._instructions else "",
            "instructions": list(self._instructions),
            "level": self.level,
            "success": bool(success),
        }

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        options = dict(options or {})
        rng = self.np_random
        if options.get("positions") is not None:
            pos = np.asarray(options["positions"], dtype=np.float64).reshape(2 * N_BALLS)
            self._positions = self._physics.settle(pos)
        else:
            self._positions = self._physics.settle(G.sample_positions(rng))
        if options.get("goal") is not None:
            goal = np.asarray(options["goal"], dtype=np.float32).reshape(-1)
            if goal.shape != (self.goal_dim,):
                raise ValueError(
                    f"goal for level {self.level!r} must have shape ({self.goal_dim},), got {goal.shape}"
                )
            self._goal = goal.copy()
        else:
            self._goal = G.sample_goal(self.level, rng, self._positions)
        self._instructions = sample_instructions(self.level, self._goal, self.n_instructions, rng)
        if options.get("instruction") is not None:
            self._instructions = [str(options["instruction"]), *self._instructions[1:]]
        self._steps = 0
        return self._obs(), self._info(False)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        a = int(action)
        if not 0 <= a < N_ACTIONS:
            raise ValueError(f"action must be in [0, {N_ACTIONS}), got {action}")
        prev = self._positions
        self._positions = self._physics.push(prev, a)
        self._steps += 1
        success = G.is_success(self.level, prev, self._positions, self._goal)
        reward = G.compute_reward(self.level, prev, self._positions, self._goal)
        terminated = bool(success or self.level == "easy")
        truncated = bool(not terminated and self._steps >= self.max_episode_steps)
        info = self._info(success)
        if self.level == "hard":
            info["progress"] = G.hard_progress(self._positions, self._goal)
        return self._obs(), float(reward), terminated, truncated, info
