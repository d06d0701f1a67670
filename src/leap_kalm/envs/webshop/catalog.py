"""WebShop's products and goals: the real files when you have them, a generated catalog when not.

Both paths meet in WebShop's *raw* formats, so one loader serves them:

* ``items_shuffle.json`` (or ``items_shuffle_1000.json``): a list of products with
  ``asin, name, full_description, small_description, pricing, customization_options,
  category, query, product_category`` (and more keys, ignored);
* ``items_ins_v2.json``: ``asin -> {attributes, instruction, instruction_attributes, ...}``;
* ``items_human_ins.json``: ``asin -> [{instruction, instruction_attributes,
  instruction_options}, ...]``: the human goals.

:func:`generate_catalog` writes the same three structures from a seed (products across
categories with names, descriptions, attributes, options and prices, and one or more
instructions each), :func:`load_products` turns them into the product records the shop and
the reward read (``Title``, ``Description``, ``BulletPoints``, ``Attributes``, ``options``,
``pricing``), and :func:`human_goals` builds goals the way WebShop builds its human goals.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REAL_FILES = {
    "items": ("items_shuffle.json", "items_shuffle_1000.json"),
    "attributes": ("items_ins_v2.json",),
    "human": ("items_human_ins.json",),
}
PRICE_BINS = [10.0 * i for i in range(1, 100)]  # WebShop's price_upper choices
PRICE_CLAUSE = ", and price lower than"  # how a goal's instruction states its price bound
NO_PRICE_LIMIT = 1_000_000.0  # price_upper of a goal whose instruction names no price (as WebShop)

# -- the generated catalog ------------------------------------------------------------------
# category -> (path under the top level, product kinds, attribute phrases, options, price range)
_CATEGORIES: dict[str, dict[str, Any]] = {
    "beauty": {
        "path": "Beauty & Personal Care › Hair Care",
        "kinds": ["shampoo", "conditioner", "hair oil", "hair mask", "dry shampoo", "hair serum"],
        "attributes": ["sulfate free", "paraben free", "long lasting", "natural ingredients",
                       "for dry hair", "cruelty free", "easy to use", "travel size"],
        "options": {"scent": ["lavender", "coconut", "mint", "unscented", "rose"],
                    "size": ["8 fl oz", "16 fl oz", "2 pack", "3 pack"]},
        "price": (6.0, 45.0),
    },
    "fashion": {
        "path": "Clothing, Shoes & Jewelry › Men › Clothing",
        "kinds": ["t-shirt", "hoodie", "jogger pants", "polo shirt", "rain jacket", "cargo shorts"],
        "attributes": ["machine wash", "slim fit", "long sleeve", "quick drying", "relaxed fit",
                       "cotton blend", "button closure", "elastic waist"],
        "options": {"color": ["black", "navy blue", "heather grey", "olive green", "white", "red"],
                    "size": ["small", "medium", "large", "x-large", "xx-large"]},
        "price": (12.0, 80.0),
    },
    "food": {
        "path": "Grocery & Gourmet Food › Snacks",
        "kinds": ["granola bars", "trail mix", "coffee beans", "herbal tea", "protein cookies", "dried mango"],
        "attributes": ["gluten free", "low sugar", "non gmo", "high protein", "keto friendly",
                       "individually wrapped", "certified organic", "dairy free"],
        "options": {"flavor": ["chocolate", "vanilla", "peanut butter", "original", "honey"],
                    "size": ["6 count", "12 count", "24 count", "1 pound"]},
        "price": (4.0, 40.0),
    },
    "electronics": {
        "path": "Electronics › Computers & Accessories",
        "kinds": ["usb c cable", "wireless mouse", "laptop stand", "bluetooth speaker", "webcam", "power bank"],
        "attributes": ["fast charging", "high speed", "easy to carry", "plug and play",
                       "noise cancelling", "long battery life", "aluminum alloy", "water resistant"],
        "options": {"color": ["black", "white", "silver", "blue"],
                    "size": ["3 ft", "6 ft", "10 ft", "standard"]},
        "price": (8.0, 95.0),
    },
    "home": {
        "path": "Home & Kitchen › Furniture",
        "kinds": ["bar stool", "bookshelf", "storage ottoman", "side table", "floor lamp", "shoe rack"],
        "attributes": ["easy assembly", "solid wood", "space saving", "living room",
                       "steel frame", "non slip", "mid century", "pu leather"],
        "options": {"color": ["walnut", "black", "white", "grey", "natural"],
                    "size": ["small", "large", "2 pack", "set of 4"]},
        "price": (25.0, 240.0),
    },
    "garden": {
        "path": "Patio, Lawn & Garden › Gardening",
        "kinds": ["garden hose", "plant pot", "pruning shears", "bird feeder", "solar lights", "raised bed"],
        "attributes": ["heavy duty", "weather resistant", "rust proof", "easy to install",
                       "for outdoor use", "lightweight", "uv protected", "eco friendly"],
        "options": {"color": ["green", "black", "terracotta", "white"],
                    "size": ["25 ft", "50 ft", "small", "large"]},
        "price": (9.0, 120.0),
    },
}  # fmt: skip
_BRANDS = ["Acorn", "Brightway", "Cedarline", "Dovetail", "Everpeak", "Foxglove", "Granite & Co",
           "Harbor", "Ironleaf", "Juniper", "Kestrel", "Lumen", "Maple Row", "Northwind", "Oakridge"]  # fmt: skip
_TEMPLATES = [
    "i am looking for a {attrs} {kind}",
    "i need a {attrs} {kind}",
    "find me a {kind} that is {attrs}",
    "i want to buy a {attrs} {kind}",
]


def generate_catalog(n_products: int, seed: int) -> dict[str, Any]:
    """A deterministic catalog in WebShop's raw formats: ``items``, ``attributes``, ``human``.

    Products spread over six categories; each has a name, a description, bullet points,
    2-4 attributes, one or two options with 2-5 values, a price or price range, and one
    human-style instruction naming some of its attributes and one value per option.
    """
    if n_products < len(_CATEGORIES):
        raise ValueError(
            f"a generated catalog needs at least {len(_CATEGORIES)} products, got {n_products}"
        )
    rng = random.Random(seed)
    items, attributes, human = [], {}, {}
    names = sorted(_CATEGORIES)
    for i in range(n_products):
        category = names[i % len(names)]
        spec = _CATEGORIES[category]
        kind = rng.choice(spec["kinds"])
        attrs = rng.sample(spec["attributes"], rng.randint(2, 4))
        option_names = rng.sample(sorted(spec["options"]), rng.randint(1, 2))
        options = {
            name: rng.sample(
                spec["options"][name], rng.randint(2, min(5, len(spec["options"][name])))
            )
            for name in option_names
        }
        low, high = spec["price"]
        price = round(rng.uniform(low, high), 2)
        pricing = (
            f"${price}"
            if rng.random() < 0.7
            else f"${price} - ${round(price * rng.uniform(1.1, 1.6), 2)}"
        )
        brand = rng.choice(_BRANDS)
        name = f"{brand} {attrs[0].title()} {kind.title()}, {attrs[1].title()}"
        asin = f"G{i:09d}"
        items.append(
            {
                "asin": asin,
                "name": name,
                "category": category,
                "query": kind,
                "product_category": f"{spec['path']} › {kind.title()}",
                "full_description": f"The {brand} {kind} is {', '.join(attrs)}. Made to last, backed by our guarantee.",
                "small_description": [f"{a.capitalize()}." for a in attrs]
                + [f"A {kind} from {brand}."],
                "pricing": pricing,
                "customization_options": {
                    n.title(): [{"value": v, "image": None} for v in vals]
                    for n, vals in options.items()
                },
                "images": [""],
            }
        )
        attributes[asin] = {"attributes": attrs}
        wanted = rng.sample(attrs, rng.randint(1, min(2, len(attrs))))
        chosen = {n: rng.choice(vals) for n, vals in options.items()}
        text = rng.choice(_TEMPLATES).format(attrs=" and ".join(wanted), kind=kind)
        text += "".join(
            f", and {value} {n}" if n != "size" else f", and size {value}"
            for n, value in chosen.items()
        )
        human[asin] = [
            {
                "instruction": text,
                "instruction_attributes": wanted,
                "instruction_options": list(chosen.values()),
            }
        ]
    return {"items": items, "attributes": attributes, "human": human}


# -- loading (real or generated) --------------------------------------------------------------
def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path}: missing ({what}); see docs/webshop.md for the real files"
        ) from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None


def read_webshop_files(data_dir: str | Path, items_file: str | None = None) -> dict[str, Any]:
    """WebShop's three raw files from ``data_dir`` (the items file: ``items_file`` or the first
    of ``items_shuffle.json``, ``items_shuffle_1000.json`` there)."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise FileNotFoundError(
            f"{data_dir}: no such folder (the WebShop data folder); see docs/webshop.md"
        )
    names = (
        [items_file] if items_file else [n for n in REAL_FILES["items"] if (data_dir / n).exists()]
    )
    if not names:
        raise FileNotFoundError(f"{data_dir}: neither {' nor '.join(REAL_FILES['items'])} is there")
    return {
        "items": _read_json(data_dir / names[0], "the products"),
        "attributes": _read_json(data_dir / REAL_FILES["attributes"][0], "the product attributes"),
        "human": _read_json(data_dir / REAL_FILES["human"][0], "the human instructions"),
    }


_ITEM_FIELDS = ("asin", "name", "full_description", "small_description", "pricing",
                "customization_options", "category", "query", "product_category")  # fmt: skip


def _prices(pricing: Any) -> list[float]:
    if not pricing:
        return [100.0]
    if isinstance(pricing, (int, float)):
        return [float(pricing)]
    values = [
        float(re.sub(r"[^\d.]", "", p))
        for p in str(pricing).split("$")[1:]
        if re.sub(r"[^\d.]", "", p)
    ]
    return values[:2] or [100.0]


def load_products(
    raw: Mapping[str, Any], num_products: int | None = None, source: str = "items"
) -> list[dict[str, Any]]:
    """Product records from WebShop's raw structures (first ``num_products``; duplicates and
    malformed asins skipped, as WebShop does).

    Raises:
        ValueError: Naming ``source``, the product index and the missing field.
    """
    products, seen = [], set()
    items = raw["items"][:num_products] if num_products else raw["items"]
    for index, item in enumerate(items):
        missing = [f for f in _ITEM_FIELDS if f not in item]
        if missing:
            raise ValueError(f"{source}: product {index} ({item.get('asin', '?')}) lacks {missing}")
        asin = str(item["asin"])
        if asin == "nan" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        pricing = _prices(item["pricing"])
        options = {
            str(name).lower(): [
                str(c["value"]).strip().replace("/", " | ").lower() for c in contents
            ]
            for name, contents in (item["customization_options"] or {}).items()
            if contents
        }
        small = item["small_description"]
        products.append(
            {
                "asin": asin,
                "name": item["name"],
                "Title": item["name"],
                "Description": item["full_description"] or "",
                "BulletPoints": small if isinstance(small, list) else [small or ""],
                "category": item["category"],
                "query": str(item["query"]).lower().strip(),
                "product_category": item["product_category"],
                "pricing": pricing,
                "Price": f"${pricing[0]}"
                if len(pricing) == 1
                else f"${pricing[0]} to ${pricing[1]}",
                "options": options,
                "Attributes": raw["attributes"].get(asin, {}).get("attributes") or ["DUMMY_ATTR"],
                "instructions": raw["human"].get(asin, []),
            }
        )
    return products


def product_prices(products: list[dict[str, Any]], seed: int) -> dict[str, float]:
    """One price per product: its price, or a seeded draw inside its price range."""
    rng = random.Random(seed)
    return {
        p["asin"]: p["pricing"][0] if len(p["pricing"]) == 1 else rng.uniform(*p["pricing"][:2])
        for p in products
    }


def human_goals(
    products: list[dict[str, Any]], prices: Mapping[str, float], seed: int
) -> list[dict[str, Any]]:
    """Goals as WebShop builds its human goals, shuffled with ``seed``: each instruction with
    attributes, options and ``price_upper`` (the larger of two of the four price bins just
    above the product's price; no limit when fewer than two bins are left)."""
    rng = random.Random(seed)
    goals = []
    for product in products:
        for instruction in product["instructions"]:
            if not instruction.get("instruction_attributes"):
                continue
            bins = [b for b in PRICE_BINS if b > prices[product["asin"]]][:4]
            if len(bins) >= 2:
                price_upper = max(rng.sample(bins, 2))
                price_text = f"{PRICE_CLAUSE} {price_upper:.2f} dollars"
            else:
                price_upper, price_text = NO_PRICE_LIMIT, ""
            goals.append(
                {
                    "asin": product["asin"],
                    "category": product["category"],
                    "query": product["query"],
                    "name": product["name"],
                    "product_category": product["product_category"],
                    "instruction_text": instruction["instruction"].strip(".") + price_text,
                    "attributes": list(instruction["instruction_attributes"]),
                    "price_upper": price_upper,
                    "goal_options": list(instruction.get("instruction_options") or []),
                    "weight": 1,
                }
            )
    rng.shuffle(goals)
    return goals


def goal_splits(
    n_goals: int, test: int = 500, eval_: int = 1000, full_size: int = 12_087
) -> dict[str, range]:
    """LEAP's splits of WebShop's shuffled goals: test = 0-499, eval = 500-1499, train = the
    rest, scaled by ``n_goals / full_size`` for smaller catalogs (at least one goal each)."""
    if n_goals >= full_size:
        n_test, n_eval = test, eval_
    else:
        n_test = max(1, round(test * n_goals / full_size))
        n_eval = max(1, round(eval_ * n_goals / full_size))
    if n_test + n_eval >= n_goals:
        raise ValueError(f"{n_goals} goals are too few to split into test, eval and train")
    return {
        "test": range(0, n_test),
        "eval": range(n_test, n_test + n_eval),
        "train": range(n_test + n_eval, n_goals),
    }
