"""Two LEAP evaluations of the same held-out games, compared game by game.

``evaluate`` pairs each iteration with the ones before it inside one data root. A
researcher also compares runs: two prompt formats, two teachers, the same iteration on
two checkouts. Each run's ``08_reporting/<env>/leap_game_outcomes.jsonl`` holds its
per-game success and score; this command pairs two of them::

    python -m leap_kalm.compare BASELINE.jsonl NEW.jsonl [--env webshop]
        [--baseline-iteration 0] [--iteration 0] [--out paired.csv]

It prints, per held-out split and for all games together, the paired change in success
and score with 95% intervals and McNemar's p (``leap_kalm.stats.paired_comparison``).
An iteration not given is the file's latest for that world.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kedro.io.core import DatasetError

from leap_kalm.datasets.jsonl import parse_jsonl_lines

OUTCOME_FIELDS = ("env", "iteration", "split", "game_id", "success", "score")


def load_outcomes(path: str | Path) -> list[dict[str, Any]]:
    """The per-game outcomes in a ``leap_game_outcomes.jsonl`` file.

    Raises:
        FileNotFoundError: The file does not exist (names it).
        ValueError: A record lacks one of ``OUTCOME_FIELDS`` (names file, record, field);
            malformed JSON raises the dataset error naming file and line.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no such outcomes file (an evaluated data root has it at "
            "08_reporting/<env>/leap_game_outcomes.jsonl)"
        )
    with path.open(encoding="utf-8") as handle:
        records = parse_jsonl_lines(handle, str(path))
    for number, record in enumerate(records, start=1):
        missing = [f for f in OUTCOME_FIELDS if f not in record]
        if missing:
            raise ValueError(
                f"{path}, record {number} ({record.get('game_id')!r}): no {missing[0]!r}"
            )
    return records


def select(
    records: list[dict[str, Any]], source: str, env: str | None, iteration: int | None
) -> tuple[str, int, dict[tuple[str, str], tuple[bool, float]]]:
    """``(env, iteration, (split, game_id) -> (success, score))`` of one evaluation in a file:
    the world given (or its only one) and the iteration given (or its latest).

    Raises:
        ValueError: The world or iteration is not in the file, or the world is ambiguous.
    """
    worlds = sorted({r["env"] for r in records})
    if env is None:
        if len(worlds) != 1:
            raise ValueError(f"{source}: holds worlds {worlds}; choose one with --env")
        env = worlds[0]
    elif env not in worlds:
        raise ValueError(f"{source}: no outcomes for env {env!r} (it has {worlds})")
    iterations = sorted({int(r["iteration"]) for r in records if r["env"] == env})
    if iteration is None:
        iteration = iterations[-1]
    elif iteration not in iterations:
        raise ValueError(f"{source}: no {env} iteration {iteration} (it has {iterations})")
    games = {
        (r["split"], r["game_id"]): (bool(r["success"]), float(r["score"]))
        for r in records
        if r["env"] == env and int(r["iteration"]) == iteration
    }
    return env, iteration, games


def compare(
    baseline: dict[tuple[str, str], tuple[bool, float]],
    new: dict[tuple[str, str], tuple[bool, float]],
) -> list[dict[str, Any]]:
    """One row per split shared by both, then ``all``: the paired comparison of the games
    both played (``leap_kalm.stats.paired_by_split``, as ``evaluate`` pairs iterations).

    Raises:
        ValueError: The two evaluations share no game.
    """
    from leap_kalm.stats import paired_by_split

    rows = paired_by_split(baseline, new)
    if not rows:
        raise ValueError("the two evaluations share no held-out game (split and game_id)")
    return rows


def format_rows(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table, in points (success) and score points (reward x 100)."""
    lines = [
        "| split | games | won both | only new | only baseline | success change (95%) "
        "| McNemar p | score change (95%) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['split']} | {r['n']} | {r['won_both']} | {r['won_only_new']} "
            f"| {r['won_only_baseline']} | {100 * r['success_delta']:+.1f} "
            f"({100 * r['success_delta_ci_low']:+.1f}..{100 * r['success_delta_ci_high']:+.1f}) "
            f"| {r['mcnemar_p']:.3f} | {100 * r['score_delta']:+.1f} "
            f"({100 * r['score_delta_ci_low']:+.1f}..{100 * r['score_delta_ci_high']:+.1f}) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m leap_kalm.compare",
        description="Pair two LEAP evaluations of the same held-out games.",
    )
    parser.add_argument("baseline", help="the baseline run's leap_game_outcomes.jsonl")
    parser.add_argument("new", help="the new run's leap_game_outcomes.jsonl")
    parser.add_argument("--env", help="world (needed when a file holds several)")
    parser.add_argument("--baseline-iteration", type=int, help="default: the file's latest")
    parser.add_argument("--iteration", type=int, help="the new run's; default: its latest")
    parser.add_argument("--out", help="also write the rows as CSV here")
    args = parser.parse_args(argv)
    try:
        env_a, it_a, a = select(
            load_outcomes(args.baseline), args.baseline, args.env, args.baseline_iteration
        )
        env_b, it_b, b = select(load_outcomes(args.new), args.new, args.env, args.iteration)
        rows = compare(a, b)
    except (OSError, ValueError, DatasetError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"baseline: {args.baseline} ({env_a} iteration {it_a}, {len(a)} games)")
    print(f"new:      {args.new} ({env_b} iteration {it_b}, {len(b)} games)")
    print(format_rows(rows))
    if args.out:
        import pandas as pd

        pd.DataFrame(rows).to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
