"""WebShop's human demonstrations (``il_trajs_finalized_images.jsonl``) as expert logs.

WebShop ships its imitation-learning data as one JSON object per line, one human
trajectory each: ``states`` (the observation before every action), ``available_actions``
(the clickable actions offered there; empty on the search page), ``action_idxs`` (the
index of the chosen action in ``available_actions``, ``-1`` for a search) and ``actions``
(the action strings, ``search[...]`` / ``click[...]``), and optionally ``images``. The
first state holds the instruction, which names the goal: WebShop's own loader finds the
goal by that text (lower-cased, quotes and the price clause removed), and so does this one.

:func:`read_human_demos` turns the lines whose goal is one of the given games into the
project's trajectory records (``schemas.make_trajectory``), so they can stand in for the
scripted expert's logs (``webshop.ingest.demos``). Each demonstration is replayed in the
shop to score it with WebShop's reward; a step the shop does not offer (the real site's
search ranks products differently from bm25s) ends the replay, and the trajectory is kept
with ``replay: diverged at step N`` and the reward reached so far (0 without a purchase).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from leap_kalm.datasets.jsonl import parse_jsonl_lines
from leap_kalm.envs.webshop.catalog import PRICE_CLAUSE
from leap_kalm.schemas import Trajectory, make_trajectory

logger = logging.getLogger(__name__)

REQUIRED_KEYS = ("states", "available_actions", "action_idxs", "actions")


def goal_key(instruction: str) -> str:
    """An instruction as WebShop matches demonstrations to goals: lower case, without
    quotes, without the price clause, trimmed."""
    text = instruction.lower().replace('"', "").replace("'", "")
    return text.split(PRICE_CLAUSE)[0].strip()


def instruction_of(state: str) -> str:
    """The instruction on a search page, in WebShop's ``text`` (``Instruction:\\n...\\n[button]
    Search``) or ``text_rich`` (``Instruction: [SEP] ... [SEP] [button] Search``) form."""
    match = re.search(
        r"instruction:\s*(?:\[sep\]\s*)?(.*?)\s*(?:\[sep\]\s*)?(?:\[button\]\s*search\b|$)",
        state,
        flags=re.IGNORECASE | re.DOTALL,
    )
    return match.group(1).strip() if match else ""


def _check(record: dict[str, Any], where: str) -> None:
    missing = [k for k in REQUIRED_KEYS if k not in record]
    if missing:
        raise ValueError(
            f"{where}: missing key(s) {missing} (WebShop's demonstrations have {list(REQUIRED_KEYS)})"
        )
    lengths = {k: len(record[k]) for k in REQUIRED_KEYS if isinstance(record[k], list)}
    if (
        len(lengths) < len(REQUIRED_KEYS)
        or len(set(lengths.values())) != 1
        or not lengths["actions"]
    ):
        raise ValueError(
            f"{where}: {', '.join(REQUIRED_KEYS)} must be lists of one equal, non-zero length; "
            f"got lengths {lengths}"
        )
    for t, (offered, idx, action) in enumerate(
        zip(record["available_actions"], record["action_idxs"], record["actions"], strict=True)
    ):
        if idx >= 0 and (idx >= len(offered) or offered[idx] != action):
            raise ValueError(
                f"{where}: step {t}: action_idxs {idx} does not point at the action "
                f"{action!r} in available_actions ({len(offered)} offered)"
            )


def read_human_demos(path: str | Path, games: list[dict[str, Any]]) -> list[Trajectory]:
    """The demonstrations in ``path`` whose goal is one of ``games`` (webshop index entries
    of one catalog), as trajectory records, in file order; at most one per game (WebShop
    has a few goals demonstrated twice: the first is kept).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        DatasetError: A line is not a JSON object (``datasets.jsonl.parse_jsonl_lines``).
        ValueError: A line is not a demonstration. Both name the file and the line (and
            the key or step).
    """
    from .env import SEARCH_TEMPLATE
    from .world import load_shop, make_env

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no such file (WebShop's human demonstrations, "
            "il_trajs_finalized_images.jsonl from its baseline_models/data; docs/webshop.md)"
        )
    if not games:
        return []
    catalogs = {g["catalog"] for g in games}
    if len(catalogs) != 1:
        raise ValueError(f"read_human_demos: the games come from {len(catalogs)} catalogs, not one")
    _, goals = load_shop(catalogs.pop())
    wanted = {goal_key(goals[g["goal_index"]]["instruction_text"]): g for g in games}
    found: dict[str, Trajectory] = {}
    unknown = 0
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    numbers = [n for n, line in enumerate(lines, start=1) if line.strip()]
    for number, record in zip(numbers, parse_jsonl_lines(lines, str(path)), strict=True):
        where = f"{path}, line {number}"
        _check(record, where)
        instruction = instruction_of(record["states"][0])
        game = wanted.get(goal_key(instruction))
        if game is None:
            unknown += 1
            continue
        if game["game_id"] in found:
            continue
        env = make_env(game, max_steps=len(record["actions"]) + 1)
        env.reset()
        steps, reward, done, diverged = [], 0.0, False, None
        for t, (state, offered, action) in enumerate(
            zip(record["states"], record["available_actions"], record["actions"], strict=True)
        ):
            searching = action.lower().startswith("search[")
            steps.append(
                {
                    "observation": state,
                    "candidate_actions": [SEARCH_TEMPLATE] if searching else list(offered),
                    "action": action,
                }
            )
            if diverged is None and not done:
                offered_here = {c.lower() for c in env.candidate_actions()}
                if (searching and env.page == "search") or action.lower() in offered_here:
                    _, reward, done, _, _ = env.step(action)
                else:
                    diverged = t
        extra = {"replay": "whole" if diverged is None else f"diverged at step {diverged}"}
        found[game["game_id"]] = make_trajectory(
            env="webshop",
            game_id=game["game_id"],
            split=game["split"],
            task=instruction,
            task_type=game["task_type"],
            model_id="human",
            steps=steps,
            success=bool(done and reward >= 1.0),
            score=reward if done else 0.0,
            **extra,
        )
    logger.info(
        "%s: %d demonstrations of the %d games asked for (%d lines for other goals)",
        path, len(found), len(games), unknown,
    )  # fmt: skip
    return [found[g["game_id"]] for g in games if g["game_id"] in found]
