"""The worlds registry: every environment is looked up by name, never by an ``if`` branch.

A world is a module that exposes one small surface, checked by :func:`get_world`:

* a **text world** (LEAP: a student acts in text, a teacher corrects it) exposes
  ``SPLITS``, ``list_games(split, n, **source)``, ``make_env(game, max_steps)``,
  ``privileged_state(game)``, ``render_privileged(state)``, ``run_expert(game,
  max_steps, seed)`` and ``parse_task(text)``;
* a **KALM world** (numeric states and actions, offline data for grounding and RL)
  exposes ``generate_offline_data(settings)``, where ``settings`` carries the fields of
  ``KalmIngestParams``.

Adding a world is one package under ``envs/`` with a ``world.py`` plus one line in
``WORLDS``. Modules import lazily, so listing worlds never loads a simulator.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from leap_kalm.schemas import EpisodeSpec

TEXT_SURFACE = (
    "SPLITS",
    "list_games",
    "make_env",
    "privileged_state",
    "render_privileged",
    "run_expert",
    "parse_task",
)
KALM_SURFACE = ("ACTIONS", "generate_offline_data")
SURFACES = {"text": TEXT_SURFACE, "kalm": KALM_SURFACE}


@dataclass(frozen=True)
class WorldEntry:
    """A registered world: its name, its kind (``text`` or ``kalm``), its module, and
    whether the default compositions (``leap_iter``, ``__default__``) include it; every
    text world also has its own ``leap_iter_<name>``."""

    name: str
    kind: str
    module: str
    default: bool = True


WORLDS: dict[str, WorldEntry] = {
    entry.name: entry
    for entry in (
        WorldEntry("alfworld", "text", "leap_kalm.envs.alfworld.world"),
        WorldEntry("webshop", "text", "leap_kalm.envs.webshop.world", default=False),
        WorldEntry("clevr", "kalm", "leap_kalm.envs.clevr.world"),
        WorldEntry("metaworld", "kalm", "leap_kalm.envs.metaworld.world"),
    )
}


def world_names(kind: str | None = None, default_only: bool = False) -> tuple[str, ...]:
    """Registered worlds, optionally only those of one kind (``text`` or ``kalm``) and only
    those in the default compositions."""
    if kind is not None and kind not in SURFACES:
        raise ValueError(f"world kind must be one of {sorted(SURFACES)}, got {kind!r}")
    return tuple(
        name
        for name, entry in WORLDS.items()
        if kind in (None, entry.kind) and (entry.default or not default_only)
    )


def get_world(name: str, kind: str | None = None) -> ModuleType:
    """The module of world ``name``, checked to expose its kind's surface.

    Raises:
        ValueError: Naming the unknown world (and the known ones), a world of the wrong
            kind, or the surface functions a world module lacks.
    """
    entry = WORLDS.get(name)
    if entry is None:
        raise ValueError(f"no world called {name!r}; known worlds: {', '.join(WORLDS)}")
    if kind is not None and entry.kind != kind:
        raise ValueError(
            f"world {name!r} is a {entry.kind} world, not a {kind} world "
            f"({kind} worlds: {', '.join(world_names(kind))})"
        )
    module = importlib.import_module(entry.module)
    missing = [attr for attr in SURFACES[entry.kind] if not hasattr(module, attr)]
    if missing:
        raise ValueError(f"world module {entry.module} lacks {missing}")
    return module


def episode_specs(
    world: str, games: list[dict[str, Any]], split: str, max_steps: int
) -> list[EpisodeSpec]:
    """The episodes of one split of a text world's games index, in index order."""
    module = get_world(world, "text")
    return [
        EpisodeSpec(
            game_id=g["game_id"],
            make_env=functools.partial(module.make_env, g, max_steps),
            split=split,
            task_type=g["task_type"],
        )
        for g in games
        if g["split"] == split
    ]
