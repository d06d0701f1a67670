"""WebShop's surface for the worlds registry (a text world, like ALFWorld).

A "game" is one goal of the shuffled human goals: ``{game_id, split, task_type (the goal's
category), catalog (the folder of WebShop's three JSON files), goal_index}``. Splits are
LEAP's for WebShop (``test`` = goals 0-499, ``eval`` = 500-1499, ``train`` = the rest,
scaled to smaller catalogs). ``generated`` writes a seeded catalog of ``CATALOG_SIZE``
products into ``games_dir`` once (the equivalent of a download folder); ``real`` reads
WebShop's own files from ``data_dir`` or ``$WEBSHOP_DATA`` (see docs/webshop.md).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

from leap_kalm.schemas import Trajectory

SPLITS = ("train", "eval", "test")
CATALOG_SIZE = 1000
PRICE_SEED = 0
GOAL_SEED = 233  # WebShop shuffles its goals with this seed

__all__ = [
    "SPLITS",
    "list_games",
    "make_env",
    "parse_task",
    "privileged_state",
    "read_demos",
    "render_privileged",
    "run_expert",
]


def _generated_catalog(games_dir: str, seed: int) -> Path:
    """Write the seeded catalog's three files once; reuse them while the seed is unchanged."""
    from .catalog import generate_catalog

    root = Path(games_dir)
    manifest = root / "manifest.json"
    wanted = {"seed": seed, "n_products": CATALOG_SIZE}
    if not (manifest.exists() and json.loads(manifest.read_text()) == wanted):
        root.mkdir(parents=True, exist_ok=True)
        raw = generate_catalog(CATALOG_SIZE, seed)
        for name, key in (
            ("items_shuffle.json", "items"),
            ("items_ins_v2.json", "attributes"),
            ("items_human_ins.json", "human"),
        ):
            (root / name).write_text(json.dumps(raw[key]), encoding="utf-8")
        manifest.write_text(json.dumps(wanted) + "\n")
    return root


def _real_catalog(data_dir: str | None) -> Path:
    path = data_dir or os.environ.get("WEBSHOP_DATA")
    if not path:
        raise FileNotFoundError(
            "webshop source 'real' needs the WebShop data folder: set webshop.ingest.data_dir "
            "or $WEBSHOP_DATA (see docs/webshop.md), or use source: generated"
        )
    return Path(path)


@functools.lru_cache(maxsize=4)
def load_shop(catalog: str) -> tuple[Any, list[dict[str, Any]]]:
    """``(Shop, shuffled goals)`` of a catalog folder, built once per process."""
    from .catalog import human_goals, load_products, product_prices, read_webshop_files
    from .env import Shop

    products = load_products(read_webshop_files(catalog), source=catalog)
    prices = product_prices(products, PRICE_SEED)
    return Shop(products, prices), human_goals(products, prices, GOAL_SEED)


def list_games(
    split: str,
    n: int | None,
    *,
    source: str = "generated",
    seed: int = 0,
    games_dir: str = "data/01_raw/webshop/generated",
    data_dir: str | None = None,
) -> list[dict[str, Any]]:
    """Index entries of one split's goals (the first ``n`` of it; ``None``: all)."""
    from .catalog import goal_splits

    if split not in SPLITS:
        raise ValueError(f"webshop has splits {SPLITS}, not {split!r}")
    catalog = (
        _generated_catalog(games_dir, seed) if source == "generated" else _real_catalog(data_dir)
    )
    _, goals = load_shop(str(catalog.resolve()))
    indices = list(goal_splits(len(goals))[split])[: n or None]
    return [
        {
            "game_id": f"webshop-{split}-{i}",
            "split": split,
            "task_type": goals[i]["category"],
            "catalog": str(catalog.resolve()),
            "goal_index": i,
        }
        for i in indices
    ]


def make_env(game: dict[str, Any], max_steps: int) -> Any:
    """The shop with this game's goal."""
    from .env import WebShopEnv

    shop, goals = load_shop(game["catalog"])
    return WebShopEnv(shop, goals[game["goal_index"]], max_steps=max_steps)


def privileged_state(game: dict[str, Any]) -> dict[str, Any]:
    """What the teacher knows: the goal's product, its price, the attributes and options asked."""
    shop, goals = load_shop(game["catalog"])
    goal = goals[game["goal_index"]]
    asin = goal["asin"].lower()
    return {
        "game_id": game["game_id"],
        "asin": asin,
        "title": shop.by_asin[asin]["Title"],
        "price": shop.prices[asin],
        "attributes": goal["attributes"],
        "goal_options": goal["goal_options"],
        "price_upper": goal["price_upper"],
    }


def render_privileged(state: dict[str, Any]) -> str:
    """A privileged state as plain text for an LLM teacher's prompt."""
    return (
        f"Target product: {state['asin']} ({state['title']}), price ${state['price']:.2f}.\n"
        f"Attributes asked: {', '.join(state['attributes'])}.\n"
        f"Options asked: {', '.join(map(str, state['goal_options'])) or 'none'}.\n"
        f"Price limit: ${state['price_upper']:.2f}."
    )


def run_expert(
    game: dict[str, Any], max_steps: int, seed: int, searches: str = "plan"
) -> Trajectory:
    """The privileged expert shopper on one goal (deterministic; ``seed`` unused;
    ``searches``: ``plan`` or ``page``, see ``expert``)."""
    from .expert import run_expert_episode

    return run_expert_episode(make_env(game, max_steps), game, max_steps, searches)


def read_demos(path: str, games: list[dict[str, Any]]) -> list[Trajectory]:
    """WebShop's human demonstrations of these games (``demos.read_human_demos``)."""
    from .demos import read_human_demos

    return read_human_demos(path, games)


def parse_task(observation: str) -> str:
    """The instruction on the search page (``WebShop [SEP] Instruction: [SEP] <text> [SEP] ...``)."""
    parts = observation.split(" [SEP] ")
    if "Instruction:" in parts and parts.index("Instruction:") + 1 < len(parts):
        return parts[parts.index("Instruction:") + 1]
    return ""
