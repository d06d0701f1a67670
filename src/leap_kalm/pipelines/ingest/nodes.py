"""Ingest nodes: a world's data in, expert logs (text worlds) and offline datasets (KALM) out.

Every node takes the world it serves as ``world`` (bound per namespace by the pipeline)
and reaches the world only through the worlds registry.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any

from leap_kalm.envs.fingerprint import unchanged_games
from leap_kalm.envs.registry import get_world
from leap_kalm.pipelines.params import KalmIngestParams, TextIngestParams
from leap_kalm.progress import track

logger = logging.getLogger(__name__)


def prepare_games(params: dict[str, Any], world: str) -> list[dict[str, Any]]:
    """Generate games (or find the official ones) and index them per split.

    Args:
        params: ``TextIngestParams`` as a mapping.
        world: A registered text world.

    Returns:
        ``[{game_id, split, task_type, path}]`` for every split.
    """
    config = TextIngestParams.from_dict(params)
    module = get_world(world, "text")
    index: list[dict[str, Any]] = []
    for split in module.SPLITS:
        games = module.list_games(
            split,
            config.n_games.get(split),
            source=config.source,
            seed=config.seed,
            games_dir=config.games_dir,
            data_dir=config.data_dir,
        )
        index.extend(games)
        logger.info("%s %s: %d games", world, split, len(games))
    return index


def collect_expert_logs(
    games: list[dict[str, Any]], params: dict[str, Any], world: str
) -> Callable[[list], Iterator]:
    """Scripted-expert trajectories on every train game (the first ``expert_games`` of them
    when that is set), written as they finish (resumable).

    Returns:
        A producer for a resumable ``JSONLDataset``: given the trajectories an interrupted
        run already wrote, it plays only the remaining games. Game ``i`` is seeded with
        ``seed + i``; each record carries the ingest parameters and its game's
        fingerprint, and the producer's ``reusable`` accepts a finished log again when
        both still match (the dataset's ``reuse: true``: the next iteration replays
        nothing).
    """
    config = TextIngestParams.from_dict(params)
    module = get_world(world, "text")
    train = [g for g in games if g["split"] == "train"]
    if config.expert_games is not None:
        if config.expert_games > len(train):
            logger.warning(
                "%s.ingest.expert_games is %d but there are %d train games: every one gets "
                "an expert log",
                world,
                config.expert_games,
                len(train),
            )
        train = train[: config.expert_games]
        logger.info("%s: expert logs on %d train games", world, len(train))
    if config.demos:
        return _read_demos(module, world, config, train)

    options = {}
    if config.expert_searches is not None:
        if "searches" not in inspect.signature(module.run_expert).parameters:
            raise ValueError(
                f"{world}.ingest.expert_searches: the {world} expert has one way to search; "
                "leave expert_searches null"
            )
        options["searches"] = config.expert_searches

    ingest_params = asdict(config)
    as_stored = json.loads(json.dumps(ingest_params))  # what a finished log reads back
    fingerprints, reusable = unchanged_games(train, ingest_params=as_stored)

    def produce(done: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        finished = {t["game_id"] for t in done}
        todo = [(i, g) for i, g in enumerate(train) if g["game_id"] not in finished]
        for i, game in track(todo, f"{world} expert logs"):
            record = module.run_expert(game, config.expert_max_steps, config.seed + i, **options)
            yield {
                **record,
                "ingest_params": ingest_params,
                "game_fingerprint": fingerprints[game["game_id"]],
            }

    produce.reusable = reusable
    return produce


def _read_demos(
    module: Any, world: str, config: TextIngestParams, train: list[dict[str, Any]]
) -> Callable[[list], Iterator]:
    """A producer of the human demonstrations in ``config.demos`` for the train games."""
    if not hasattr(module, "read_demos"):
        raise ValueError(
            f"{world}.ingest.demos: the {world} world reads no demonstration files; "
            "leave demos null to record the scripted expert"
        )
    demos = module.read_demos(config.demos, train)
    if not demos:
        raise ValueError(
            f"{world}.ingest.demos: {config.demos} demonstrates none of the {len(train)} train "
            "games indexed (raise ingest.n_games.train, or check the file is for this catalog)"
        )

    def produce(done: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        finished = {t["game_id"] for t in done}
        for record in demos:
            if record["game_id"] not in finished:
                yield {**record, "ingest_params": asdict(config)}

    return produce


def generate_kalm_offline_data(
    params: dict[str, Any], kalm_real_data: str | None, world: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Roll out a KALM world's scripted policies with noise into KALM's offline arrays, or,
    with ``--params kalm_real_data=PATH``, take the user's KALM file instead (read in
    either of KALM's layouts, validated, never written).

    Returns:
        The same dict twice: for the ``.npy`` (KALM's format) and the ``.hdf5`` entries.
    """
    from leap_kalm.envs.kalm_format import validate_kalm_dataset

    if kalm_real_data:
        from leap_kalm.datasets import KalmDataset

        logger.info(
            "%s: using %s (kalm_real_data) instead of generating data", world, kalm_real_data
        )
        data = KalmDataset(filepath=kalm_real_data).load()
        return data, data
    config = KalmIngestParams.from_dict(params)
    data = get_world(world, "kalm").generate_offline_data(config)
    validate_kalm_dataset(data, source=f"generated {world} data")
    return data, data


def summarize_kalm_offline_data(data: dict[str, Any], world: str) -> dict[str, Any]:
    """Validate a KALM-format dataset (generated or a user's own file) and summarise it.

    Raises:
        ValueError: Naming the catalog entry and the key, shape or dtype at fault.
    """
    from leap_kalm.envs.kalm_format import validate_kalm_dataset

    summary = validate_kalm_dataset(data, source=f"catalog entry {world}.kalm_offline")
    return {
        key: (value.tolist() if hasattr(value, "tolist") else value)
        for key, value in summary.items()
    }
