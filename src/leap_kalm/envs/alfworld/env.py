"""A gymnasium-style ALFWorld environment on TextWorld's engine, plus a small batch runner."""

from __future__ import annotations

import json
import re
import string
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from .engine import start_engine

NOTHING_HAPPENS = "Nothing happens."
_PUT = re.compile(r"^\s*put\s+(.+?)\s+(?:in/on|into|in|on|to)\s+(.+?)\s*$", re.IGNORECASE)
_CHARSET = string.printable  # letters, digits, punctuation and whitespace (incl. newline)
MAX_TEXT = 8192


def normalize_command(command: str) -> str:
    """Map ALFWorld <0.4 syntax ``put X in/on Y`` onto 0.4's ``move X to Y``; strip spaces."""
    command = " ".join(str(command).split())
    m = _PUT.match(command)
    if m:
        return f"move {m.group(1)} to {m.group(2)}"
    return command


def read_traj_data(game_path: str | Path) -> dict[str, Any]:
    """The ``traj_data.json`` next to a ``game.tw-pddl``."""
    return json.loads((Path(game_path).parent / "traj_data.json").read_text())


def game_id(game_path: str | Path) -> str:
    """``<task dir>/<trial dir>``, the id ALFWorld games are known by."""
    p = Path(game_path).parent
    return f"{p.parent.name}/{p.name}"


class AlfWorldEnv(gym.Env):
    """One ALFWorld game as a gymnasium environment (text observations, text actions).

    ``reset`` returns the ``-= Welcome to TextWorld, ALFRED! =-`` room description followed by
    ``Your task is to: …``. ``step`` takes a command; ``put X in/on Y`` is accepted as well as
    ``move X to Y``. A command that is not admissible returns ``Nothing happens.`` and still
    counts as a step. Reward is 1.0 on the winning step; ``terminated`` is the win and
    ``truncated`` the step cap.

    ``info`` carries ``admissible_commands``, ``won``, ``task``, ``task_type``, ``game_id``,
    ``steps`` and (with ``facts=True``) ``facts``, the engine's human-readable facts, which the
    handcoded expert reads.
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        game_path: str | Path,
        max_steps: int = 20,
        *,
        facts: bool = False,
        cache_commands: bool = True,
        render_mode: str | None = None,
    ) -> None:
        self.game_path = Path(game_path)
        if not self.game_path.is_file():
            raise FileNotFoundError(f"no ALFWorld game at {self.game_path}")
        self.max_steps = int(max_steps)
        self.render_mode = render_mode
        self._facts = facts
        self._cache_commands = cache_commands
        self.traj_data = read_traj_data(self.game_path)
        self.task_type: str = self.traj_data["task_type"]
        self.game_id = game_id(self.game_path)
        self.observation_space = spaces.Text(max_length=MAX_TEXT, min_length=0, charset=_CHARSET)
        self.action_space = spaces.Text(max_length=200, min_length=1, charset=_CHARSET)
        self._engine: Any = None
        self._state: Any = None
        self._steps = 0
        self._done = False
        self.task = ""
        self.last_observation = ""

    # -------------------------------------------------------------- gymnasium API

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        """Start the game over; the engine is deterministic, ``seed`` only seeds ``np_random``."""
        super().reset(seed=seed)
        if self._engine is None:
            self._engine = start_engine(
                self.game_path, facts=self._facts, cache_commands=self._cache_commands
            )
        self._state = self._engine.reset()
        self._steps = 0
        self._done = False
        obs = str(self._state["feedback"]).strip()
        marker = "Your task is to: "
        self.task = obs.split(marker, 1)[1].strip().rstrip(".") if marker in obs else ""
        self.last_observation = obs
        return obs, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        """Apply one command; returns ``(observation, reward, terminated, truncated, info)``."""
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        command = normalize_command(action)
        self._state, _, _ = self._engine.step(command)
        self._steps += 1
        obs = str(self._state["feedback"]).strip() or NOTHING_HAPPENS
        won = bool(self._state["won"])
        terminated = won
        truncated = (not won) and self._steps >= self.max_steps
        self._done = terminated or truncated
        self.last_observation = obs
        return obs, 1.0 if won else 0.0, terminated, truncated, self._info()

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self.last_observation
        return None

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None
            self._state = None

    # -------------------------------------------------------------- helpers

    @property
    def admissible_commands(self) -> list[str]:
        return list(self._state["admissible_commands"]) if self._state is not None else []

    @property
    def engine_state(self) -> Any:
        """The raw TextWorld game state of the last reset/step (for experts and teachers)."""
        return self._state

    def _info(self) -> dict[str, Any]:
        s = self._state
        info = {
            "admissible_commands": list(s["admissible_commands"]),
            "won": bool(s["won"]),
            "task": self.task,
            "task_type": self.task_type,
            "game_id": self.game_id,
            "game_path": str(self.game_path),
            "steps": self._steps,
        }
        if self._facts:
            info["facts"] = list(s["facts"])
        return info


Policy = Callable[[Sequence[str], Sequence[dict]], Sequence[str]]


class BatchEnv:
    """Steps N :class:`AlfWorldEnv` games side by side (sequentially, in one process).

    Finished games are frozen: their later actions are ignored and their last observation is
    repeated, so the batch stays aligned until every game is done.
    """

    def __init__(self, envs: Sequence[AlfWorldEnv]) -> None:
        self.envs = list(envs)
        self.done = [False] * len(self.envs)
        self._last: list[tuple[str, float, bool, bool, dict]] = []

    @classmethod
    def from_paths(
        cls, game_paths: Sequence[str | Path], max_steps: int = 20, **kw: Any
    ) -> BatchEnv:
        return cls([AlfWorldEnv(p, max_steps=max_steps, **kw) for p in game_paths])

    def __len__(self) -> int:
        return len(self.envs)

    def reset(self, seed: int | None = None) -> tuple[list[str], list[dict]]:
        out = [
            env.reset(seed=None if seed is None else seed + i) for i, env in enumerate(self.envs)
        ]
        self.done = [False] * len(self.envs)
        self._last = [(obs, 0.0, False, False, info) for obs, info in out]
        return [o for o, _ in out], [i for _, i in out]

    def step(
        self, actions: Sequence[str]
    ) -> tuple[list[str], list[float], list[bool], list[bool], list[dict]]:
        if len(actions) != len(self.envs):
            raise ValueError(f"expected {len(self.envs)} actions, got {len(actions)}")
        for i, (env, action) in enumerate(zip(self.envs, actions, strict=True)):
            if self.done[i]:
                obs, _, term, trunc, info = self._last[i]
                self._last[i] = (obs, 0.0, term, trunc, info)
                continue
            self._last[i] = env.step(action)
            self.done[i] = self._last[i][2] or self._last[i][3]
        obs, rew, term, trunc, infos = (list(x) for x in zip(*self._last, strict=True))
        return obs, rew, term, trunc, infos

    def close(self) -> None:
        for env in self.envs:
            env.close()


def run_batch(
    envs: Sequence[AlfWorldEnv] | BatchEnv,
    policy_fn: Policy,
    max_steps: int | None = None,
) -> list[dict[str, Any]]:
    """Play every game to the end with ``policy_fn(observations, infos) -> actions``.

    Returns one record per game: ``{game_id, task, task_type, steps: [{observation,
    candidate_actions, action}], success, score, num_actions}``.
    """
    batch = envs if isinstance(envs, BatchEnv) else BatchEnv(envs)
    obs, infos = batch.reset()
    records = [
        {
            "game_id": e.game_id,
            "task": e.task,
            "task_type": e.task_type,
            "steps": [],
            "success": False,
            "score": 0.0,
            "num_actions": 0,
        }
        for e in batch.envs
    ]
    cap = max_steps or max(e.max_steps for e in batch.envs)
    for _ in range(cap):
        if all(batch.done):
            break
        actions = list(policy_fn(obs, infos))
        for i, rec in enumerate(records):
            if not batch.done[i]:
                rec["steps"].append(
                    {
                        "observation": obs[i],
                        "candidate_actions": list(infos[i]["admissible_commands"]),
                        "action": actions[i],
                    }
                )
        obs, rewards, _, _, infos = batch.step(actions)
        for i, rec in enumerate(records):
            rec["success"] = rec["success"] or bool(infos[i]["won"])
            rec["score"] = 1.0 if rec["success"] else 0.0
            rec["num_actions"] = len(rec["steps"])
    return records
