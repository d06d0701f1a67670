"""The privileged expert shopper: from any page, the next action towards the goal product.

It knows the goal's product (``asin``) and options, as WebShop's human demonstrations in
effect did. It searches the goal's instruction (without the price clause); when the
product is not among the results it searches the product's own title; it pages through
the results to the product, opens it, chooses each goal option and buys. Being a function
of the page, it also says what to do after any student action (the teacher's replay).
"""

from __future__ import annotations

from typing import Any

from leap_kalm.envs.webshop.catalog import NO_PRICE_LIMIT, PRICE_CLAUSE
from leap_kalm.envs.webshop.env import RESULTS_PER_PAGE, WebShopEnv
from leap_kalm.schemas import Trajectory, make_trajectory


def goal_query(goal: dict[str, Any]) -> str:
    """The instruction without its price clause: what a shopper types first."""
    return goal["instruction_text"].split(PRICE_CLAUSE)[0].strip().lower()


def _wanted_options(env: WebShopEnv) -> dict[str, str]:
    """Option name -> the goal's value, for the options the goal product offers."""
    product = env.shop.by_asin[env.goal["asin"].lower()]
    wanted = {}
    for name, values in product["options"].items():
        for option in env.goal["goal_options"]:
            if str(option).lower() in values:
                wanted[name] = str(option).lower()
    return wanted


def _under_limit(goal: dict[str, Any]) -> str:
    upper = goal["price_upper"]
    return f"under the {upper:.2f} dollar limit" if upper < NO_PRICE_LIMIT else "at any price"


def _why_not(env: WebShopEnv) -> str:
    """Why the open (wrong) item fails the instruction, from what its page shows: a price
    over the limit, an option the instruction asks for that it does not offer, or else
    attributes it lacks."""
    product = env.shop.by_asin[env._asin]
    if env.shop.prices[env._asin] > env.goal["price_upper"]:
        return (
            f"At {product['Price']} this item is over the {env.goal['price_upper']:.2f} "
            "dollar limit; back to the results."
        )
    offered = {v for values in product["options"].values() for v in values}
    missing = [str(o).lower() for o in env.goal["goal_options"] if str(o).lower() not in offered]
    if missing:
        return f"This item offers no {missing[0]}; back to the results."
    return "This item lacks attributes the instruction asks for; back to the results."


def expert_action(env: WebShopEnv) -> tuple[str, str]:
    """``(action, hint-only reason)``: the expert's next action on ``env``'s current page."""
    target = env.goal["asin"].lower()
    if env.page == "search":
        if env._query == goal_query(env.goal) and target not in env._results:
            title = env.shop.by_asin[target]["Title"].lower()
            return (
                f"search[{title}]",
                "The first search missed the item; a search with a product name narrows it down.",
            )
        return (
            f"search[{goal_query(env.goal)}]",
            "Searching the words of the instruction finds matching products.",
        )
    if env.page == "results":
        if target in env._results:
            page = env._results.index(target) // RESULTS_PER_PAGE + 1
            if page == env._page_no:
                product = env.shop.by_asin[target]
                return (
                    f"click[{target}]",
                    f"{product['Title']} at {product['Price']} is what the instruction asks "
                    f"for, {_under_limit(env.goal)}.",
                )
            if page > env._page_no:
                return (
                    "click[next >]",
                    "No result on this page fits every requirement; the next page may.",
                )
            return "click[< prev]", "A better match was on an earlier page."
        return "click[back to search]", "None of these results fits; a different search is needed."
    if env._asin != target:
        return "click[< prev]", _why_not(env)
    if env._sub is not None:
        return "click[< prev]", "The details are read; back to the item to choose its options."
    for name, value in _wanted_options(env).items():
        if env._options.get(name) != value:
            return f"click[{value}]", f"The instruction asks for {value}."
    return "click[buy now]", "The item and its options match the instruction and the price limit."


def run_expert_episode(env: WebShopEnv, game: dict[str, Any], max_steps: int) -> Trajectory:
    """Play one goal with the expert; a trajectory record (``score``: WebShop's reward)."""
    observation, info = env.reset()
    steps, reward, done = [], 0.0, False
    for _ in range(max_steps):
        action, reason = expert_action(env)
        steps.append(
            {
                "observation": observation,
                "candidate_actions": list(info["admissible_commands"]),
                "reason": reason,
                "action": action,
            }
        )
        observation, reward, done, truncated, info = env.step(action)
        if done or truncated:
            break
    return make_trajectory(
        env="webshop",
        game_id=game["game_id"],
        split=game["split"],
        task=env.goal["instruction_text"],
        task_type=game["task_type"],
        model_id="expert",
        steps=steps,
        success=bool(done and reward >= 1.0),
        score=reward if done else 0.0,
    )
