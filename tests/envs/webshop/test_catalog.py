"""WebShop catalog: the generated catalog in WebShop's raw formats, the loader for real and
generated files, human goals with WebShop's price rule, and LEAP's splits."""

from __future__ import annotations

import json

import pytest

from leap_kalm.envs.webshop.catalog import (
    PRICE_BINS,
    generate_catalog,
    goal_splits,
    human_goals,
    load_products,
    product_prices,
    read_webshop_files,
)


@pytest.fixture(scope="module")
def catalog():
    raw = generate_catalog(1000, seed=3)
    products = load_products(raw)
    prices = product_prices(products, seed=0)
    return raw, products, prices, human_goals(products, prices, seed=233)


def test_a_generated_catalog_is_large_varied_and_seeded(catalog):
    raw, products, _, _ = catalog
    assert len(products) == 1000 and len({p["category"] for p in products}) >= 5
    assert generate_catalog(1000, seed=3) == raw and generate_catalog(1000, seed=4) != raw
    for p in products[:50]:
        assert (
            p["Title"] and p["Description"] and p["BulletPoints"] and 2 <= len(p["Attributes"]) <= 4
        )
        assert p["options"] and all(len(v) >= 2 for v in p["options"].values())
        assert 1 <= len(p["pricing"]) <= 2 and p["Price"].startswith("$")


def test_goals_name_attributes_options_and_a_price_from_the_bins_above(catalog):
    _, products, prices, goals = catalog
    by_asin = {p["asin"]: p for p in products}
    assert len(goals) == 1000
    for goal in goals[:100]:
        product, price = by_asin[goal["asin"]], prices[goal["asin"]]
        assert set(goal["attributes"]) <= set(product["Attributes"])
        assert all(
            any(o in vals for vals in product["options"].values()) for o in goal["goal_options"]
        )
        bins = [b for b in PRICE_BINS if b > price][:4]
        assert goal["price_upper"] in bins[1:] and price < goal["price_upper"]
        assert goal["instruction_text"].endswith(
            f"price lower than {goal['price_upper']:.2f} dollars"
        )
    assert human_goals(products, prices, seed=233) == goals


def test_leap_splits_scale_with_the_number_of_goals():
    full = goal_splits(12_087)
    assert (full["test"], full["eval"]) == (range(0, 500), range(500, 1500))
    assert full["train"] == range(1500, 12_087)
    small = goal_splits(1000)
    assert len(small["test"]) == 41 and len(small["eval"]) == 83 and small["train"].stop == 1000
    with pytest.raises(ValueError, match="too few to split"):
        goal_splits(2)


def test_real_files_load_and_bad_ones_are_named(tmp_path, catalog):
    raw = generate_catalog(12, seed=1)
    for name, key in (
        ("items_shuffle_1000.json", "items"),
        ("items_ins_v2.json", "attributes"),
        ("items_human_ins.json", "human"),
    ):
        (tmp_path / name).write_text(json.dumps(raw[key]))
    assert load_products(read_webshop_files(tmp_path)) == load_products(raw)
    (tmp_path / "items_human_ins.json").write_text('{"G000000001": [')
    with pytest.raises(ValueError, match=r"items_human_ins.json: not valid JSON"):
        read_webshop_files(tmp_path)
    (tmp_path / "items_ins_v2.json").unlink()
    with pytest.raises(
        FileNotFoundError, match=r"items_ins_v2.json: missing \(the product attributes\)"
    ):
        read_webshop_files(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such folder"):
        read_webshop_files(tmp_path / "nowhere")
    broken = {**raw, "items": [{k: v for k, v in raw["items"][0].items() if k != "pricing"}]}
    with pytest.raises(
        ValueError, match=r"items.json: product 0 \(G000000000\) lacks \['pricing'\]"
    ):
        load_products(broken, source="items.json")
