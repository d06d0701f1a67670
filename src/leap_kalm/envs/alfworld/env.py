"""A gymnasium-style ALFWorld environment on TextWorld's engine."""

from __future__ import annotations

import json
import re
import string
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from .engine import start_engine
from .text import parse_task

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
        self.task = parse_task(obs)
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
