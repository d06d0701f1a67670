"""`privilege` nodes: the privileged state a teacher sees, per game."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from leap_kalm.envs.fingerprint import unchanged_games
from leap_kalm.envs.registry import get_world
from leap_kalm.pipelines.params import LeapParams
from leap_kalm.progress import track


def compute_privileged_states(
    games: list[dict[str, Any]], params: dict[str, Any]
) -> Callable[[list], Iterator]:
    """Privileged state (true object locations, critical receptacles, optimal plan) of every train game.

    Args:
        games: The games index from ``ingest``.
        params: ``LeapParams`` as a mapping.

    Returns:
        A producer for a resumable ``JSONLDataset`` of one record per train game, keyed by
        ``game_id``, each with its game's fingerprint; its ``reusable`` accepts a record
        whose game is unchanged (the dataset's ``reuse: true``: the next iteration
        recomputes nothing).
    """
    config = LeapParams.from_dict(params)
    world = get_world(config.env, "text")
    train = [g for g in games if g["split"] == "train"]
    fingerprints, reusable = unchanged_games(train)

    def produce(done: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        finished = {r["game_id"] for r in done}
        todo = [g for g in train if g["game_id"] not in finished]
        for game in track(todo, f"{config.env} privileged states"):
            yield {
                **world.privileged_state(game),
                "game_fingerprint": fingerprints[game["game_id"]],
            }

    produce.reusable = reusable
    return produce
