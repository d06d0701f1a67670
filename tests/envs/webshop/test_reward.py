"""WebShop's reward formula: type, attribute, option and price parts, and their total."""

from __future__ import annotations

import pytest

from leap_kalm.envs.webshop.reward import (
    get_attribute_reward,
    get_option_reward,
    get_reward,
    get_type_reward,
    normalize_color,
)

GOAL = {
    "query": "running shoes",
    "product_category": "Clothing › Men › Shoes › Athletic",
    "name": "lightweight running shoes for men",
    "attributes": ["lightweight", "rubber sole"],
    "goal_options": {"color": "navy blue", "size": "10.5"},
    "price_upper": 50.0,
}
PRODUCT = {
    "query": "running shoes",
    "product_category": "Clothing › Men › Shoes › Athletic",
    "name": "Trail running shoes for men, breathable mesh",
    "Title": "Trail running shoes for men, breathable mesh",
    "Attributes": ["Rubber sole", "breathable"],
    "BulletPoints": ["A lightweight upper", "Cushioned heel"],
    "Description": "Made for long runs.",
}


def test_colours_reduce_to_their_base_word():
    assert normalize_color("light navy blue") == "blue"
    assert normalize_color("heather grey") == "grey"
    assert normalize_color("10.5 wide") == "10.5 wide"


def test_type_reward_levels():
    assert get_type_reward(PRODUCT, GOAL) == {
        "r_type": 1.0, "query_match": True, "category_match": True, "title_score": 1.0,
    }  # fmt: skip
    other = {**PRODUCT, "query": "boots", "product_category": "Garden › Tools"}
    assert get_type_reward(other, GOAL)["r_type"] == 1.0  # the nouns still match
    unrelated = {**other, "name": "ceramic coffee mug"}
    result = get_type_reward(unrelated, GOAL)
    assert result["title_score"] == 0.0 and result["r_type"] == 0.0


@pytest.mark.parametrize(
    ("goal_nouns", "product_nouns", "matches_otherwise", "title_score", "r_type"),
    [
        (("a", "b", "c", "d"), ("a", "b"), False, 0.5, 1.0),  # more than 20% of the nouns
        (("a", "b", "c", "d", "e"), ("a",), False, 0.2, 0.5),  # 20%: no match
        (("a", "b", "c", "d", "e"), ("a",), True, 0.2, 1.0),  # ... unless query or category match
        (("a",) + tuple("bcdefghijk"), ("a",), True, 1 / 11, 0.1),  # under 10%
        (
            ("a", "a", "b"),
            ("a",),
            False,
            1 / 3,
            1.0,
        ),  # a repeated goal noun counts twice below the line
        ((), ("a",), False, 0.2, 0.5),  # a goal name without nouns
    ],
)
def test_type_reward_rules(
    monkeypatch, goal_nouns, product_nouns, matches_otherwise, title_score, r_type
):
    nouns = {"goal": goal_nouns, "product": product_nouns}
    monkeypatch.setattr("leap_kalm.envs.webshop.reward._nouns", lambda text: nouns[text])
    goal = {"query": "q", "product_category": "a › b", "name": "goal"}
    product = {
        "query": "q" if matches_otherwise else "x",
        "product_category": "c › d",
        "name": "product",
    }
    result = get_type_reward(product, goal)
    assert result["title_score"] == pytest.approx(title_score) and result["r_type"] == r_type


def test_category_paths_match_on_two_shared_levels():
    unrelated = {
        **PRODUCT,
        "query": "boots",
        "name": "ceramic coffee mug",
        "product_category": "Garden",
    }
    two_levels = {**unrelated, "product_category": "Clothing › Men › Bags"}
    assert get_type_reward(two_levels, GOAL)["category_match"] is True


def test_attributes_match_fuzzily_or_inside_the_text():
    assert get_attribute_reward(PRODUCT, GOAL) == (
        1.0,
        2,
    )  # "rubber sole" fuzzily, "lightweight" in a feature
    bare = {**PRODUCT, "Attributes": [], "BulletPoints": []}
    assert get_attribute_reward(bare, GOAL) == (0.0, 0)


def test_options_match_after_colour_normalisation():
    assert get_option_reward(["dark blue", "10.5"], ["navy blue", "10.5"]) == (1.0, 2)
    assert get_option_reward(["red", "9"], ["navy blue", "10.5"]) == (0.0, 0)
    assert get_option_reward(["red"], []) == (None, 0)


def test_total_reward_and_its_breakdown():
    reward, info = get_reward(PRODUCT, GOAL, 45.0, {"color": "blue", "size": "10.5"}, verbose=True)
    assert reward == pytest.approx(1.0)
    assert info["r_att"] == 1.0 and info["r_option"] == 1.0 and info["r_price"] is True
    assert info["w_att"] == pytest.approx(2 / 5) and info["w_option"] == pytest.approx(2 / 5)
    # too dear, one option wrong: (2 attributes + 1 option + 0 price) / 5
    assert get_reward(PRODUCT, GOAL, 60.0, {"color": "red", "size": "10.5"}) == pytest.approx(3 / 5)
    # the wrong kind of product scales everything by r_type
    mug = {**PRODUCT, "query": "mug", "product_category": "Kitchen", "name": "ceramic coffee mug"}
    assert get_reward(mug, GOAL, 10.0, {"color": "blue", "size": "10.5"}) == 0.0
