"""`privilege` nodes: the privileged state a teacher sees, per game."""

from __future__ import annotations

from typing import Any

from leap_kalm.envs.registry import get_world
from leap_kalm.pipelines.params import LeapParams
from leap_kalm.progress import track


def compute_privileged_states(
    games: list[dict[str, Any]], params: dict[str, Any]
) -> list[dict[str, Any]]:
    """Privileged state (true object locations, critical receptacles, optimal plan) of every train game.

    Args:
        games: The games index from ``ingest``.
        params: ``LeapParams`` as a mapping.

    Returns:
        One record per train game, keyed by ``game_id``.
    """
    config = LeapParams.from_dict(params)
    world = get_world(config.env, "text")
    train = [g for g in games if g["split"] == "train"]
    return [world.privileged_state(g) for g in track(train, f"{config.env} privileged states")]
