"""Synthetic goals' weights follow WebShop's ``get_synthetic_goals`` rule.

WebShop counts each instruction attribute once per generated goal (one goal per option
combination of a product), then gives each goal the mean of ``1 / count`` over its attributes.
The reference below re-implements that rule in plain Python on WebShop-shaped dicts, without
this package's code, and the catalog's weights are compared against it.
"""

from __future__ import annotations

import itertools
import random
from math import isclose

from sapo_gym.webshop.catalog import Product, goals_from_synthetic
from sapo_gym.webshop.dataset import load_split_catalog
from sapo_gym.webshop.generate import generate_raw


def reference_weights(products: list[dict]) -> list[tuple[str, tuple[str, ...], float]]:
    """WebShop's rule: ``cnt_atts[att] += 1`` inside the loop over option combinations."""
    goals, cnt_atts = [], {}
    for product in products:
        if product.get("instruction_text") is None:
            continue
        names = sorted(product["options"])
        for combination in itertools.product(*(product["options"][n] for n in names)):
            goals.append((product["asin"], tuple(combination), product["instruction_attributes"]))
            for att in product["instruction_attributes"]:
                cnt_atts[att] = cnt_atts.get(att, 0) + 1
    return [(asin, combo, sum(1.0 / cnt_atts[a] for a in atts) / len(atts)) for asin, combo, atts in goals]


def _product(asin: str, options: dict[str, list[str]]) -> Product:
    return Product(
        asin=asin,
        title=f"title {asin}",
        category="c",
        query="q",
        product_category="a › b › c",
        pricing=(15.0,),
        price_tag="$15.00",
        options=options,
        attributes=[],
        bullet_points=[],
        description="",
    )


# a hand-made catalog: B1 has 2 x 3 option combinations, B2 none (one goal), B3 one, B4 no instruction
CATALOG = [
    ("B1", {"size": ["s", "m", "l"], "color": ["red", "blue"]}, ["soft", "warm"]),
    ("B2", {}, ["soft"]),
    ("B3", {"color": ["grey"]}, ["warm", "rare"]),
    ("B4", {"color": ["red", "blue"]}, None),
]


def _ours(catalog: list) -> list[tuple[str, tuple[str, ...], float]]:
    products = [_product(asin, options) for asin, options, _ in catalog]
    ins = {
        asin: ({"instruction": f"i want {asin}", "instruction_attributes": attrs} if attrs else {})
        for asin, _, attrs in catalog
    }
    goals = goals_from_synthetic(products, {p.asin: 15.0 for p in products}, ins, random.Random(0))
    return [(g.asin, tuple(g.goal_options), g.weight) for g in goals]


def _as_webshop(catalog: list) -> list[dict]:
    return [
        {
            "asin": asin,
            "options": options,
            "instruction_attributes": attrs or [],
            "instruction_text": f"i want {asin}" if attrs else None,
        }
        for asin, options, attrs in catalog
    ]


def test_hand_computed_weights_count_each_option_combination() -> None:
    got = _ours(CATALOG)
    # counts per goal: soft 6 (B1) + 1 (B2) = 7, warm 6 (B1) + 1 (B3) = 7, rare 1
    want = {"B1": (1 / 7 + 1 / 7) / 2, "B2": 1 / 7, "B3": (1 / 7 + 1 / 1) / 2}
    assert [a for a, _, _ in got] == ["B1"] * 6 + ["B2", "B3"]
    for asin, _, weight in got:
        assert isclose(weight, want[asin], rel_tol=1e-12), asin
    # counting once per product instead (soft 2, warm 2, rare 1) would give B1 1/2, B2 1/2, B3 3/4
    assert not isclose(got[0][2], 0.5) and not isclose(got[-1][2], 0.75)


def test_weights_match_the_reference_on_the_hand_made_catalog() -> None:
    ours, ref = _ours(CATALOG), reference_weights(_as_webshop(CATALOG))
    assert [(a, c) for a, c, _ in ours] == [(a, c) for a, c, _ in ref]
    assert all(isclose(w, r, rel_tol=1e-12) for (_, _, w), (_, _, r) in zip(ours, ref))


def test_weights_match_the_reference_on_the_verl_agent_catalog() -> None:
    catalog = load_split_catalog("verl-agent-test")
    _, ins, _ = generate_raw(1000, seed=0)
    shaped = [
        {
            "asin": p.asin,
            "options": p.options,
            "instruction_attributes": (ins.get(p.asin) or {}).get("instruction_attributes", []),
            "instruction_text": (ins.get(p.asin) or {}).get("instruction"),
        }
        for p in catalog.products
    ]
    ref = {(asin, combo): w for asin, combo, w in reference_weights(shaped)}
    assert len(ref) == len(catalog.goals)
    for g in catalog.goals:
        assert isclose(g.weight, ref[(g.asin, tuple(g.goal_options))], rel_tol=1e-12), (g.asin, g.goal_options)
