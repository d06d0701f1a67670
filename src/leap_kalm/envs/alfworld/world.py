"""ALFWorld's surface for the worlds registry (see ``leap_kalm.envs.registry``)."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

from leap_kalm.schemas import Trajectory

from .generate import SPLITS
from .text import parse_task

logger = logging.getLogger(__name__)

__all__ = [
    "SPLITS",
    "list_games",
    "make_env",
    "parse_task",
    "privileged_state",
    "render_privileged",
    "run_expert",
]


def _game_entry(path: Path, split: str) -> dict[str, Any]:
    from .env import game_id, read_traj_data

    return {
        "game_id": game_id(path),
        "split": split,
        "task_type": read_traj_data(path)["task_type"],
        "path": str(path.resolve()),
    }


def _generated_split(split: str, n: int, seed: int, games_dir: str) -> list[Path]:
    """Generate a split's games once; reuse them while seed and size are unchanged."""
    from .data import load_games
    from .generate import generate_games

    root = Path(games_dir)
    manifest = root / split / "manifest.json"
    wanted = {"seed": seed, "n": n}
    if manifest.exists() and json.loads(manifest.read_text()) == wanted:
        games = load_games(root / split)
        if len(games) == n:
            logger.info("alfworld %s: reusing %d generated games in %s", split, n, root / split)
            return games
    if (root / split).exists():
        shutil.rmtree(root / split)
    games = generate_games(split, n, seed, root)
    manifest.write_text(json.dumps(wanted) + "\n")
    return games


def list_games(
    split: str,
    n: int | None,
    *,
    source: str = "generated",
    seed: int = 0,
    games_dir: str = "data/01_raw/alfworld/generated",
    data_dir: str | None = None,
) -> list[dict[str, Any]]:
    """Index entries ``{game_id, split, task_type, path}`` of one split.

    ``generated`` games are made from alfworld's packaged layouts (``n`` of them, ``None``
    or 0: none); ``real`` games come from the official data (``n`` caps them).
    """
    from .data import load_games, resolve_alfworld_data

    if source == "generated":
        paths = _generated_split(split, int(n), seed, games_dir) if n else []
    else:
        paths = load_games(resolve_alfworld_data(data_dir, split))[: n or None]
    return [_game_entry(path, split) for path in paths]


def make_env(game: dict[str, Any], max_steps: int) -> Any:
    """The gymnasium environment of one indexed game."""
    from .env import AlfWorldEnv

    return AlfWorldEnv(game["path"], max_steps=max_steps)


def privileged_state(game: dict[str, Any]) -> dict[str, Any]:
    """True object locations, critical receptacles and the optimal plan of one game."""
    from .privileged import privileged_state as from_game_file

    return from_game_file(game["path"])


def render_privileged(state: dict[str, Any]) -> str:
    """A privileged state as plain text for an LLM teacher's prompt."""
    from .privileged import render_privileged_state

    return render_privileged_state(state)


def run_expert(game: dict[str, Any], max_steps: int, seed: int) -> Trajectory:
    """alfworld's handcoded expert on one game (with the 0.4.2 move/put workaround)."""
    from .expert import run_expert_episode

    return run_expert_episode(game["path"], max_steps=max_steps, seed=seed, split=game["split"])
