"""Benchmark: the WebShop replacement's search and environment speed.

For generated catalogs of 1k and 100k products (``envs.webshop.catalog.generate_catalog``,
the embedded default's generator), measures:

* the bm25s index build (``Shop(...)``: tokenizing title, description, features and
  attributes, then indexing), wall time;
* query latency of ``Shop.search`` (top 50, WebShop's ``search[...]``) on the goals' own
  queries (the instruction without its price clause): p50, p95, mean; and how often the
  goal's product is in the top 10 (recall@10);
* environment steps/s: the scripted expert shopper plays goals end to end
  (search, result page, item page, options, buy), steps counted and timed, the expert's
  own decisions included.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/webshop_search.py [--sizes 1000 100000]

Writes benchmarks/results/webshop_search.md.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

from _report import write_report

from leap_kalm.envs.webshop.catalog import (
    generate_catalog,
    human_goals,
    load_products,
    product_prices,
)
from leap_kalm.envs.webshop.env import Shop, WebShopEnv
from leap_kalm.envs.webshop.expert import goal_query, run_expert_episode


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(n_products: int, n_queries: int, n_episodes: int, seed: int) -> dict:
    t0 = time.perf_counter()
    products = load_products(generate_catalog(n_products, seed), source="generated")
    prices = product_prices(products, seed)
    goals = human_goals(products, prices, seed)
    generated = time.perf_counter() - t0

    t0 = time.perf_counter()
    shop = Shop(products, prices)
    build = time.perf_counter() - t0

    latencies, hits = [], 0
    for goal in goals[:n_queries]:
        t0 = time.perf_counter()
        found = shop.search(goal_query(goal))
        latencies.append(time.perf_counter() - t0)
        hits += goal["asin"].lower() in found[:10]

    warm = WebShopEnv(shop, goals[-1], max_steps=15)  # loads spaCy's tagger (a few s, once)
    run_expert_episode(warm, {"game_id": "warm", "split": "bench", "task_type": ""}, 15)
    steps, rewards = 0, []
    t0 = time.perf_counter()
    for i, goal in enumerate(goals[:n_episodes]):
        env = WebShopEnv(shop, goal, max_steps=15)
        game = {"game_id": f"goal_{i}", "split": "bench", "task_type": goal["category"]}
        trajectory = run_expert_episode(env, game, max_steps=15)
        steps += len(trajectory["steps"])
        rewards.append(trajectory["score"])
    played = time.perf_counter() - t0
    n = len(latencies)
    return {
        "products": len(products),
        "goals": len(goals),
        "generate_s": generated,
        "build_s": build,
        "queries": n,
        "p50_ms": 1000 * percentile(latencies, 0.5),
        "p95_ms": 1000 * percentile(latencies, 0.95),
        "mean_ms": 1000 * statistics.fmean(latencies),
        "recall10": hits / n,
        "episodes": len(rewards),
        "steps": steps,
        "steps_per_s": steps / played,
        "expert_reward": statistics.fmean(rewards),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 100_000])
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = []
    for size in args.sizes:
        print(f"catalog of {size} products ...", flush=True)
        rows.append(measure(size, args.queries, args.episodes, args.seed))
    lines = [
        "# WebShop search and environment speed",
        "",
        f"`benchmarks/webshop_search.py --sizes {' '.join(map(str, args.sizes))}` on "
        f"{platform.processor() or platform.machine()}, one process, one thread "
        f"(bm25s with its numpy backend). Queries: the first {args.queries} goals' "
        "instructions without the price clause, top 50 retrieved.",
        "",
        "| products | goals | catalog generation | index build | query p50 | query p95 | query mean | goal's product in top 10 | env steps/s (expert episodes) | expert mean reward |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['products']:,} | {r['goals']:,} | {r['generate_s']:.1f} s | {r['build_s']:.2f} s "
            f"| {r['p50_ms']:.2f} ms | {r['p95_ms']:.2f} ms | {r['mean_ms']:.2f} ms "
            f"| {100 * r['recall10']:.0f}% ({round(r['recall10'] * r['queries'])}/{r['queries']}) "
            f"| {r['steps_per_s']:.0f} ({r['steps']} steps, {r['episodes']} episodes) "
            f"| {r['expert_reward']:.3f} |"
        )
    lines += [
        "",
        "Env steps/s includes the expert's own decision, one search per episode, the "
        "observation text rendered at every step and WebShop's reward at the purchase "
        "(spaCy's part-of-speech tagger on the title: about 4 ms; the tagger's one-off "
        "load, about 6 s, is done before the clock starts).",
        "",
        "The generator draws products from templates per category, so a large catalog holds "
        "many products with the same attributes and options as the goal's own: recall@10 of "
        "that one product falls with the catalog's size while the expert still buys a "
        "product worth reward 1 (paging through results when needed: see its steps per "
        "episode).",
    ]
    write_report("webshop_search", lines)


if __name__ == "__main__":
    main()
