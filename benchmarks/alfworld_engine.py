"""Benchmark: ALFWorld engine steps with the command-text cache vs stock TextWorld.

The same games and the same random admissible actions are played with both engines,
alternating per game so both see the same machine load; outputs are compared step by
step. Writes benchmarks/results/alfworld_engine.md.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/alfworld_engine.py [--games 12 --steps 20]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from leap_kalm.envs.alfworld import AlfWorldEnv, generate_games


def play(path: Path, cached: bool, actions_seed: int, steps: int) -> tuple[float, list[str]]:
    env = AlfWorldEnv(path, max_steps=steps + 1, cache_commands=cached)
    obs, info = env.reset()
    rng = random.Random(actions_seed)
    seen = [obs]
    start = time.perf_counter()
    for _ in range(steps):
        obs, _, terminated, _, info = env.step(rng.choice(info["admissible_commands"]))
        seen.append(obs + "|" + ",".join(info["admissible_commands"]))
        if terminated:
            break
    elapsed = time.perf_counter() - start
    env.close()
    return elapsed, seen


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--games", type=int, default=12)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        paths = generate_games("train", args.games, seed=11, out_dir=tmp)
        generation = time.perf_counter() - start
        totals = {False: 0.0, True: 0.0}
        n_steps = {False: 0, True: 0}
        identical = True
        for i, path in enumerate(paths):
            runs = {}
            for cached in (False, True) if i % 2 == 0 else (True, False):
                elapsed, seen = play(path, cached, i, args.steps)
                totals[cached] += elapsed
                n_steps[cached] += len(seen) - 1
                runs[cached] = seen
            identical &= runs[False] == runs[True]
    rate = {k: n_steps[k] / totals[k] for k in totals}
    lines = [
        "# ALFWorld engine: command-text cache vs stock TextWorld",
        "",
        f"{args.games} generated train games, up to {args.steps} random admissible steps each, "
        "same actions for both engines, order alternated per game.",
        "",
        "| engine | steps | seconds | steps/s |",
        "|---|---|---|---|",
        f"| stock PddlEnv | {n_steps[False]} | {totals[False]:.2f} | {rate[False]:.1f} |",
        f"| with command-text cache | {n_steps[True]} | {totals[True]:.2f} | {rate[True]:.1f} |",
        "",
        f"Speed-up: **{rate[True] / rate[False]:.2f}×**. Observations and admissible commands identical: {identical}.",
        f"Game generation (planner-checked): {args.games / generation:.2f} games/s.",
    ]
    from _report import write_report

    write_report("alfworld_engine", lines)


if __name__ == "__main__":
    main()
