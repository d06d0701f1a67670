"""Benchmark: what the shop's search sees of a product, the shop's ``fields`` against WebShop's own document.

On one generated catalog, side by side for both ``env.INDEXES``, over the first goals'
queries (the instruction without its price clause, as the expert searches):

* how often the goal's own product is ranked first and in the top 10;
* what a shopper that buys the *first* result earns (choosing the goal's options where
  that product offers them): mean WebShop reward and how often it is 1. This is the
  behaviour-cloned student's habit (docs/results.md), so it bounds how much a LEAP
  correction can add.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/webshop_index.py``
"""

from __future__ import annotations

import argparse
import statistics

from _report import write_report

from leap_kalm.envs.webshop.catalog import (
    generate_catalog,
    human_goals,
    load_products,
    product_prices,
)
from leap_kalm.envs.webshop.env import INDEXES, Shop
from leap_kalm.envs.webshop.expert import goal_query, wanted_options
from leap_kalm.envs.webshop.reward import get_reward


def measure(products: list, prices: dict, goals: list, index: str) -> dict:
    shop = Shop(products, prices, index=index)
    first = top10 = 0
    rewards = []
    for goal in goals:
        found = shop.search(goal_query(goal))
        target = goal["asin"].lower()
        first += bool(found) and found[0] == target
        top10 += target in found[:10]
        if found:
            product = shop.by_asin[found[0]]
            options = wanted_options(product, goal)
            rewards.append(get_reward(product, goal, shop.prices[found[0]], options))
        else:
            rewards.append(0.0)
    return {
        "index": index,
        "first": first,
        "top10": top10,
        "reward_mean": statistics.fmean(rewards),
        "reward_one": sum(r == 1 for r in rewards),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--products", type=int, default=1000)
    parser.add_argument("--goals", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    products = load_products(generate_catalog(args.products, args.seed), source="generated")
    prices = product_prices(products, args.seed)
    goals = human_goals(products, prices, args.seed)[: args.goals]
    n = len(goals)
    rows = [measure(products, prices, goals, index) for index in INDEXES]
    lines = [
        "# WebShop search: the shop's index against WebShop's own document",
        "",
        f"`benchmarks/webshop_index.py --products {args.products} --goals {args.goals} "
        f"--seed {args.seed}`: the generated catalog of {args.products:,} products, the first "
        f"{n} shuffled goals, each searched with its instruction without the price clause.",
        "",
        "| index | what it reads | goal's product first | goal's product in top 10 | first result bought: mean reward | first result bought: reward 1 |",
        "|---|---|---|---|---|---|",
    ]
    reads = {
        "fields": "title, description, every bullet point, attributes",
        "webshop": "title, description, first bullet point, option text (WebShop's Lucene document)",
    }
    for r in rows:
        lines.append(
            f"| `{r['index']}` | {reads.get(r['index'], '')} | {r['first']}/{n} "
            f"| {r['top10']}/{n} | {r['reward_mean']:.3f} | {r['reward_one']}/{n} |"
        )
    lines += [
        "",
        "The first result is bought with the goal's options where it offers them, so its "
        "reward is what a shopper that always opens the first result can earn.",
    ]
    write_report("webshop_index", lines)


if __name__ == "__main__":
    main()
