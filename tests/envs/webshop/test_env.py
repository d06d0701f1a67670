"""The WebShop-compatible shop: bm25s search, result pages, item pages, options, buying with
WebShop's reward, invalid actions, the step cap, WebShop's text_rich observations."""

from __future__ import annotations

import pytest

from leap_kalm.envs.webshop.catalog import (
    generate_catalog,
    human_goals,
    load_products,
    product_prices,
)
from leap_kalm.envs.webshop.env import INDEXES, SEARCH_TEMPLATE, Shop, WebShopEnv, parse_action
from leap_kalm.envs.webshop.expert import goal_query
from leap_kalm.envs.webshop.reward import get_reward
from leap_kalm.schemas import REWARD_PARTS


@pytest.fixture(scope="module")
def shop_and_goals():
    products = load_products(generate_catalog(300, seed=2))
    prices = product_prices(products, seed=0)
    return Shop(products, prices), human_goals(products, prices, seed=233)


def _go_to_item(env, asin):
    """Search the product's own name and page through the results to it."""
    env.step(f"search[{env.shop.by_asin[asin]['Title']}]")
    while f"click[{asin}]" not in env.candidate_actions():
        assert "click[next >]" in env.candidate_actions(), "the product is in the top 50"
        env.step("click[next >]")
    return env.step(f"click[{asin}]")


def test_buying_the_goal_product_with_its_options_scores_one(shop_and_goals):
    shop, goals = shop_and_goals
    goal = goals[0]
    env = WebShopEnv(shop, goal)
    observation, info = env.reset()
    assert observation.startswith("WebShop [SEP] Instruction: [SEP] ") and info[
        "admissible_commands"
    ] == [SEARCH_TEMPLATE]
    observation, *_ = _go_to_item(env, goal["asin"].lower())
    assert "[button] Buy Now [button_]" in observation and env.page == "item"
    for option in goal["goal_options"]:
        observation, *_ = env.step(f"click[{option}]")
        assert f"[clicked button] {option} [clicked button_]" in observation
    _, reward, done, truncated, info = env.step("click[buy now]")
    assert reward == pytest.approx(1.0) and done and not truncated and info["won"]
    assert info["admissible_commands"] == []
    parts = info["reward_parts"]  # WebShop's breakdown, for the evaluation summary
    assert parts["r_type"] == parts["r_att"] == parts["r_price"] == pytest.approx(1.0)
    assert parts.get("r_option", 1.0) == pytest.approx(1.0)
    assert "r_option" in parts or not goal["goal_options"]


def test_a_wrong_purchase_scores_what_the_reward_gives(shop_and_goals):
    shop, goals = shop_and_goals
    goal = goals[1]
    other = next(p for p in shop.products if p["category"] != goal["category"])
    env = WebShopEnv(shop, goal)
    env.reset()
    _go_to_item(env, other["asin"].lower())
    _, reward, done, _, info = env.step("click[buy now]")
    assert done and reward < 1.0 and not info["won"]
    product = shop.by_asin[other["asin"].lower()]
    _, expected = get_reward(product, goal, shop.prices[product["asin"].lower()], {}, verbose=True)
    assert info["reward_parts"] == {
        k: pytest.approx(float(expected[k])) for k in REWARD_PARTS if expected.get(k) is not None
    }
    assert info["reward_parts"]["r_att"] < 1.0


def test_pages_link_as_webshop_does(shop_and_goals):
    shop, goals = shop_and_goals
    env = WebShopEnv(shop, goals[2])
    env.reset()
    observation, *_ = env.step("search[shampoo]")
    assert env.page == "results" and "Page 1 (Total results: " in observation
    assert env.candidate_actions()[:2] == ["click[back to search]", "click[next >]"]
    first = env.candidate_actions()[2]
    env.step("click[next >]")
    assert "click[< prev]" in env.candidate_actions() and first not in env.candidate_actions()
    env.step("click[< prev]")
    env.step(first)
    observation, *_ = env.step("click[features]")
    assert env.candidate_actions() == ["click[back to search]", "click[< prev]"]
    env.step("click[< prev]")
    assert env.page == "item" and "click[buy now]" in env.candidate_actions()
    env.step("click[< prev]")
    assert env.page == "results"
    env.step("click[back to search]")
    assert env.page == "search"


def test_every_page_opens_with_the_instruction_as_webshop_templates_do(shop_and_goals):
    shop, goals = shop_and_goals
    goal = goals[0]
    env = WebShopEnv(shop, goal)
    head = f"Instruction: [SEP] {goal['instruction_text']} [SEP] "
    observation, _ = env.reset()
    assert observation == f"WebShop [SEP] {head}[button] Search [button_]"
    observation, *_ = env.step(f"search[{goal['instruction_text']}]")
    assert observation.startswith(f"{head}[button] Back to Search [button_] [SEP] Page 1 ")
    observation, *_ = _go_to_item(env, goal["asin"].lower())
    assert env.page == "item"
    assert observation.startswith(f"{head}[button] Back to Search [button_] [SEP] [button] < Prev")
    observation, *_ = env.step("click[description]")
    assert observation.startswith(f"{head}[button] Back to Search [button_] [SEP] [button] < Prev")
    assert observation.count("Instruction:") == 1


def test_unavailable_actions_change_nothing_and_the_step_cap_ends_the_episode(shop_and_goals):
    shop, goals = shop_and_goals
    env = WebShopEnv(shop, goals[3], max_steps=3)
    start, _ = env.reset()
    for action in ("click[buy now]", "search[<query>]"):
        observation, reward, done, truncated, _ = env.step(action)
        assert (observation, reward, done, truncated) == (start, 0.0, False, False)
    *_, truncated, info = env.step("go to the shop")[1:]
    assert truncated
    assert info["reward_parts"] == dict.fromkeys(REWARD_PARTS, 0.0)  # no purchase: WebShop's 0s
    assert parse_action(" Click[Buy Now] ") == ("click", "buy now") and parse_action("buy") is None


@pytest.mark.parametrize("index", ["fields", "webshop"])
def test_a_goals_own_query_finds_its_product_in_the_top_ten(index):
    products = load_products(generate_catalog(300, seed=2))
    prices = product_prices(products, seed=0)
    goals = human_goals(products, prices, seed=233)[:100]
    shop = Shop(products, prices, index=index)
    found = [g["asin"].lower() in shop.search(goal_query(g))[:10] for g in goals]
    assert sum(found) >= 90, f"{index}: {sum(found)} of 100 goals"


def test_the_webshop_index_reads_title_description_first_bullet_and_options(shop_and_goals):
    shop, _ = shop_and_goals
    product = next(p for p in shop.products if len(p["BulletPoints"]) > 1 and p["options"])
    document = INDEXES["webshop"](product)
    name, values = next(iter(product["options"].items()))
    assert f"{name}: {', '.join(values)}".lower() in document
    assert product["BulletPoints"][0].lower() in document
    assert product["BulletPoints"][-1].lower() not in document
    assert document == document.lower()
    with pytest.raises(ValueError, match="index must be one of"):
        Shop(shop.products[:3], shop.prices, index="lucene")
