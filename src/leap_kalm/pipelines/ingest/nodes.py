"""Ingest nodes: environment data in, expert logs and offline datasets out."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from leap_kalm.schemas import ConfigMixin

logger = logging.getLogger(__name__)

SPLITS = ("train", "valid_seen", "valid_unseen")


@dataclass
class AlfWorldIngestParams(ConfigMixin):
    """Where ALFWorld games come from and how many expert logs to record.

    Attributes:
        source: ``generated`` (from alfworld's packaged layouts) or ``real`` (official data).
        data_dir: Official data root for ``real`` (default: ``$ALFWORLD_DATA``).
        games_dir: Where generated games are written (the equivalent of a download folder).
        n_games: Games per split when generating; with ``real``, a cap (``null``: all).
        seed: Generation seed.
        expert_max_steps: Step cap for the handcoded expert.
    """

    source: str = "generated"
    data_dir: str | None = None
    games_dir: str = "data/01_raw/alfworld/generated"
    n_games: dict[str, int | None] = field(
        default_factory=lambda: {"train": 60, "valid_seen": 12, "valid_unseen": 12}
    )
    seed: int = 0
    expert_max_steps: int = 50

    def __post_init__(self) -> None:
        if self.source not in ("generated", "real"):
            raise ValueError(
                f"alfworld ingest: source must be 'generated' or 'real', got {self.source!r}"
            )


def _game_entry(path: Path, split: str) -> dict[str, Any]:
    from leap_kalm.envs.alfworld.env import game_id, read_traj_data

    return {
        "game_id": game_id(path),
        "split": split,
        "task_type": read_traj_data(path)["task_type"],
        "path": str(path.resolve()),
    }


def _generated_split(config: AlfWorldIngestParams, split: str, n: int) -> list[Path]:
    """Generate a split's games once; reuse them while seed and size are unchanged."""
    from leap_kalm.envs.alfworld import generate_games, load_games

    root = Path(config.games_dir)
    manifest = root / split / "manifest.json"
    wanted = {"seed": config.seed, "n": n}
    if manifest.exists() and json.loads(manifest.read_text()) == wanted:
        games = load_games(root / split)
        if len(games) == n:
            logger.info("alfworld %s: reusing %d generated games in %s", split, n, root / split)
            return games
    if (root / split).exists():
        import shutil

        shutil.rmtree(root / split)
    games = generate_games(split, n, config.seed, root)
    manifest.write_text(json.dumps(wanted) + "\n")
    return games


def prepare_alfworld_games(params: dict[str, Any]) -> list[dict[str, Any]]:
    """Generate games (or find the official ones) and index them per split.

    Args:
        params: ``AlfWorldIngestParams`` as a mapping.

    Returns:
        ``[{game_id, split, task_type, path}]`` for every split.
    """
    from leap_kalm.envs.alfworld import load_games, resolve_alfworld_data

    config = AlfWorldIngestParams.from_dict(params)
    index: list[dict[str, Any]] = []
    for split in SPLITS:
        n = config.n_games.get(split)
        if config.source == "generated":
            games = _generated_split(config, split, int(n or 0)) if n else []
        else:
            games = load_games(resolve_alfworld_data(config.data_dir, split))[: n or None]
        index.extend(_game_entry(path, split) for path in games)
        logger.info("alfworld %s: %d games", split, len(games))
    return index


def collect_alfworld_expert_logs(
    games: list[dict[str, Any]], params: dict[str, Any]
) -> Callable[[list], Iterator]:
    """Handcoded-expert trajectories on every train game, written as they finish (resumable).

    Returns:
        A producer for a resumable ``JSONLDataset``: given the trajectories an interrupted
        run already wrote, it plays only the remaining games.
    """
    from leap_kalm.envs.alfworld import run_expert_episode
    from leap_kalm.progress import track

    config = AlfWorldIngestParams.from_dict(params)
    train = [g for g in games if g["split"] == "train"]

    def produce(done: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        finished = {t["game_id"] for t in done}
        todo = [(i, g) for i, g in enumerate(train) if g["game_id"] not in finished]
        for i, game in track(todo, "alfworld expert logs"):
            record = run_expert_episode(
                game["path"], max_steps=config.expert_max_steps, seed=config.seed + i
            )
            record["ingest_params"] = asdict(config)
            yield record

    return produce


@dataclass
class KalmIngestParams(ConfigMixin):
    """Scripted-policy data for KALM (CLEVR-Robot or Meta-World).

    Attributes:
        env: ``clevr`` or ``metaworld``.
        n_episodes: CLEVR episodes.
        tasks: Meta-World tasks (KALM names, mapped onto v3); ``null`` = KALM's train list.
        n_per_task: Meta-World episodes per task.
        level: Goal level of the data (``real`` for training data).
        horizon: Episode length ``T``.
        noise: Random-action probabilities; each episode draws one (successes and failures).
        n_instructions: Paraphrases ``K`` per episode.
        seed: Seed of scenes, goals, policy noise.
    """

    env: str = "clevr"
    n_episodes: int = 1000
    tasks: list[str] | None = None
    n_per_task: int = 20
    level: str = "real"
    horizon: int | None = None
    noise: list[float] | None = None
    n_instructions: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        if self.env not in ("clevr", "metaworld"):
            raise ValueError(f"KALM ingest: env must be 'clevr' or 'metaworld', got {self.env!r}")


def generate_kalm_offline_data(params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Roll out scripted policies with noise into KALM's offline arrays.

    Returns:
        The same dict twice: for the ``.npy`` (KALM's format) and the ``.hdf5`` entries.
    """
    from leap_kalm.envs import kalm_data

    config = KalmIngestParams.from_dict(params)
    optional = {
        k: v for k, v in {"horizon": config.horizon, "noise": config.noise}.items() if v is not None
    }
    if config.env == "clevr":
        data = kalm_data.generate_clevr_dataset(
            config.n_episodes,
            config.seed,
            level=config.level,
            n_instructions=config.n_instructions,
            **optional,
        )
    else:
        from leap_kalm.envs.metaworld import TASKS_BY_LEVEL

        tasks = config.tasks or list(TASKS_BY_LEVEL[config.level])
        data = kalm_data.generate_metaworld_dataset(
            tasks,
            config.n_per_task,
            config.seed,
            level=config.level,
            n_instructions=config.n_instructions,
            **optional,
        )
    kalm_data.validate_kalm_dataset(data, source=f"generated {config.env} data")
    return data, data


def summarize_kalm_offline_data(data: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Validate a KALM-format dataset (generated or a user's own file) and summarise it.

    Raises:
        ValueError: Naming the catalog entry and the key, shape or dtype at fault.
    """
    from leap_kalm.envs.kalm_data import validate_kalm_dataset

    config = KalmIngestParams.from_dict(params)
    summary = validate_kalm_dataset(data, source=f"catalog entry {config.env}.kalm_offline")
    return {
        key: (value.tolist() if hasattr(value, "tolist") else value)
        for key, value in summary.items()
    }
