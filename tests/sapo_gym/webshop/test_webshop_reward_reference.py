"""Differential test: our reward against WebShop's rules restated as facts (``tests/support/webshop_goal_reference``).

400 generated (goal, product, options, price) cases over generated catalogs, half human goals
(option values) and half synthetic goals (``{name: value}``), with non-ASCII characters injected
into a third of them; plus 3,000 fuzzy-score pairs and the edge cases where the original crashes.
Zero differences are allowed where the original is defined; totals are compared with ``==``
(both sides add the same integers and divide once, so the floats are bit-identical).
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from sapo_gym.webshop.catalog import Catalog, Goal, Product, build_catalog
from sapo_gym.webshop.generate import generate_raw
from sapo_gym.webshop.nouns import NOUN_TAGS, OFFLINE, NounRule, noun_rule, spacy_model_package
from sapo_gym.webshop.reward import option_matches, purchase_reward, token_set_ratio
from tests.support import webshop_goal_reference as ref

NON_ASCII = (
    "\u2122",
    "\u00ae",
    "\u00e9",
    "\u2019",
    "\u2013",
    "\u00a0",
    "\u00b0",
    "\u201c",
    "\u00fc",
    "\u4e2d",
    "\u00d7",
)


def _catalog(human: bool, seed: int) -> Catalog:
    products, ins, humans = generate_raw(120, seed=seed)
    return build_catalog(products, ins, humans, source=f"generated-ref-{seed}", human_goals=human)


def as_purchased(p: Product) -> dict:
    return {
        "query": p.query,
        "product_category": p.product_category,
        "name": p.title,
        "Title": p.title,
        "Attributes": list(p.attributes),
        "BulletPoints": list(p.bullet_points),
        "Description": p.description,
    }


def as_goal(g: Goal) -> dict:
    options = dict(zip(g.option_names, g.goal_options)) if g.option_names else list(g.goal_options)
    return {
        "query": g.query,
        "product_category": g.product_category,
        "name": g.name,
        "attributes": list(g.attributes),
        "goal_options": options,
        "price_upper": g.price_upper,
    }


def _sprinkle(rng: random.Random, text: str) -> str:
    """Replace one space (or append) with a non-ASCII character."""
    ch = rng.choice(NON_ASCII)
    return text.replace(" ", ch, 1) if " " in text and rng.random() < 0.7 else text + ch


def _pick(rng: random.Random, cat: Catalog, goal: Goal) -> Product:
    roll = rng.random()
    if roll < 0.5:
        return cat.by_asin[goal.asin]
    same = [p for p in cat.products if p.query == goal.query and p.asin != goal.asin]
    return rng.choice(same) if same and roll < 0.75 else rng.choice(cat.products)


def _choose(rng: random.Random, product: Product, goal: Goal) -> dict[str, str]:
    chosen = {}
    for name, values in product.options.items():
        if rng.random() < 0.15:
            continue
        wanted = [v for v in goal.goal_options if v in values]
        chosen[name] = wanted[0] if wanted and rng.random() < 0.35 else rng.choice(values)
    return chosen


def make_case(rng: random.Random, cat: Catalog) -> tuple[Product, Goal, float, dict[str, str]]:
    goal = rng.choice(cat.goals)
    product = _pick(rng, cat, goal)
    options = _choose(rng, product, goal)
    price = rng.choice([goal.price_upper - 1, goal.price_upper, goal.price_upper + 0.01, cat.prices[product.asin]])
    if rng.random() < 0.33:
        product = replace(
            product,
            title=_sprinkle(rng, product.title),
            description=_sprinkle(rng, product.description),
            attributes=[_sprinkle(rng, a) if rng.random() < 0.5 else a for a in product.attributes],
        )
        goal = replace(goal, attributes=[_sprinkle(rng, a) if rng.random() < 0.3 else a for a in goal.attributes])
        options = {k: _sprinkle(rng, v) if rng.random() < 0.3 else v for k, v in options.items()}
    return product, goal, price, options


def cases(n: int = 400) -> list[tuple[Product, Goal, float, dict[str, str]]]:
    rng = random.Random(15)
    catalogs = [_catalog(True, 1), _catalog(False, 2)]
    return [make_case(rng, catalogs[i % 2]) for i in range(n)]


def _ours(product: Product, goal: Goal, price: float, options: dict[str, str], rule: NounRule) -> dict:
    r = purchase_reward(product, goal, price, options, rule)
    return {
        "total": r.total,
        "r_type": r.r_type,
        "query_match": r.query_match,
        "category_match": r.category_match,
        "title_score": r.title_score,
        "attribute_matches": r.attribute_matches,
        "option_matches": r.option_matches,
        "price_ok": r.price_ok,
    }


def _theirs(product: Product, goal: Goal, price: float, options: dict[str, str], nouns) -> dict:
    total, parts = ref.get_reward(as_purchased(product), as_goal(goal), price, options, nouns)
    return dict(parts, total=total)


def test_reward_matches_the_reference_on_400_generated_cases() -> None:
    all_cases = cases()
    diffs = [
        (p.asin, g.instruction_text, o, _ours(p, g, x, o, OFFLINE), _theirs(p, g, x, o, OFFLINE.nouns))
        for p, g, x, o in all_cases
        if _ours(p, g, x, o, OFFLINE) != _theirs(p, g, x, o, OFFLINE.nouns)
    ]
    assert not diffs, diffs[:3]
    # the cases exercise what the rules distinguish: wins and losses, both goal kinds, non-ASCII text,
    # and synthetic goals where scoring values instead of (name, value) pairs would change the count
    totals = [_ours(p, g, x, o, OFFLINE)["total"] for p, g, x, o in all_cases]
    assert 30 < sum(t == 1.0 for t in totals) < 370 and len(set(totals)) >= 10
    assert sum(any(ord(c) > 127 for c in p.title) for p, _, _, _ in all_cases) > 60
    pair_sensitive = sum(
        option_matches(list(o.values()), list(g.goal_options)) != _ours(p, g, x, o, OFFLINE)["option_matches"]
        for p, g, x, o in all_cases
        if g.option_names
    )
    assert pair_sensitive >= 3


def test_every_option_combination_of_the_target_matches_the_reference() -> None:
    """The issue's measurement: buy the target of synthetic goals with each option combination."""
    cat = _catalog(False, 3)
    goals = [g for g in cat.goals if len(g.option_names) == 2][:40]
    checked = wins = wins_by_values = 0
    for goal in goals:
        product = cat.by_asin[goal.asin]
        names = list(product.options)
        for a in product.options[names[0]]:
            for b in product.options[names[1]]:
                options = {names[0]: a, names[1]: b}
                ours = _ours(product, goal, cat.prices[goal.asin], options, OFFLINE)
                assert ours == _theirs(product, goal, cat.prices[goal.asin], options, OFFLINE.nouns), (goal, options)
                by_values = option_matches(list(options.values()), list(goal.goal_options))
                checked, wins = checked + 1, wins + (ours["total"] == 1.0)
                rest_perfect = (
                    ours["attribute_matches"] == len(goal.attributes) and ours["price_ok"] and ours["r_type"] == 1.0
                )
                wins_by_values += rest_perfect and by_values == len(goal.goal_options)
    assert checked >= 300
    assert wins_by_values > wins  # scoring values alone (the old rule) would pay more wins


def _pairs(n: int) -> list[tuple[str, str]]:
    rng = random.Random(4)
    words = [
        "large",
        "x-large",
        "pack",
        "of",
        "2",
        "4",
        "navy",
        "blue",
        "sulfate",
        "free",
        "men's",
        "t-shirt",
        "fl",
        "oz",
        "1.7",
        "black",
        "color",
        "size",
        "",
        "-",
        "XL",
        "Grey",
    ]

    def phrase() -> str:
        text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 4)))
        return _sprinkle(rng, text) if rng.random() < 0.3 else text

    return [(phrase(), phrase()) for _ in range(n)]


def test_token_set_ratio_matches_the_reference_on_3000_pairs() -> None:
    pairs = _pairs(3000)
    diffs = [
        (a, b, token_set_ratio(a, b), ref.token_set_ratio(a, b))
        for a, b in pairs
        if token_set_ratio(a, b) != ref.token_set_ratio(a, b)
    ]
    assert not diffs, diffs[:5]
    scores = {token_set_ratio(a, b) for a, b in pairs}
    assert {0, 100} <= scores and len(scores) > 30
    pair_keys = [(("size", a), b) for a, b in pairs[:500]]
    assert all(token_set_ratio(b, k) == ref.token_set_ratio(b, k) for k, b in pair_keys)


def test_token_set_ratio_matches_thefuzz_0_19_0_itself() -> None:
    """Where the dev extra installed WebShop's pinned thefuzz, compare against the library directly."""
    thefuzz = pytest.importorskip("thefuzz")
    import difflib
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Using slow pure-python SequenceMatcher": that is the point
        from thefuzz import fuzz
    if thefuzz.__version__ != "0.19.0" or fuzz.SequenceMatcher is not difflib.SequenceMatcher:
        pytest.skip(f"thefuzz {thefuzz.__version__} on {fuzz.SequenceMatcher.__module__}: not WebShop's setting")
    rng = random.Random(9)
    alphabet = "ab_-\u00e9\u2122 \u4e2dx1'\\\n"
    noise = [
        (
            "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8))),
            "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8))),
        )
        for _ in range(2000)
    ]
    pairs = _pairs(3000) + [(("size", a), b) for a, b in _pairs(500)] + noise
    diffs = [(a, b) for a, b in pairs if token_set_ratio(a, b) != fuzz.token_set_ratio(a, b)]
    assert not diffs, diffs[:5]


# ------------------------------------------------------------------ edge cases
def _edge(make_product, make_goal, **goal_fields) -> tuple[Product, Goal]:
    return make_product(), make_goal(**goal_fields)


@pytest.mark.parametrize(
    "goal_fields, options, price",
    [
        ({"goal_options": []}, {"color": "black"}, 15.0),  # no goal options
        ({}, {}, 15.0),  # nothing chosen
        ({"name": "the of and"}, {"color": "black"}, 15.0),  # goal title without nouns: title score 0.2
        ({"goal_options": ["white"], "option_names": ("color",)}, {"color": "white"}, 20.0),  # pair equal to a colour
        ({"goal_options": ["x-large"], "option_names": ("size",)}, {"size": "large"}, 20.0),
        ({"attributes": ["\u00e9\u00e8"]}, {}, 1.0),  # an attribute that processes to nothing
    ],
)
def test_edge_cases_where_the_original_is_defined(make_product, make_goal, goal_fields, options, price) -> None:
    product, goal = _edge(make_product, make_goal, **goal_fields)
    assert _ours(product, goal, price, options, OFFLINE) == _theirs(product, goal, price, options, OFFLINE.nouns)


def test_goal_without_attributes_original_crashes_ours_scores_the_rest(make_product, make_goal) -> None:
    product, goal = _edge(make_product, make_goal, attributes=[])
    with pytest.raises(ZeroDivisionError):
        _theirs(product, goal, 15.0, {"color": "black"}, OFFLINE.nouns)
    r = purchase_reward(product, goal, 15.0, {"color": "black"}, OFFLINE)
    # documented choice: the same total with 0 of 0 attributes: (0 + 1 option + price) / (0 + 2 + 1) x r_type 1
    assert (r.attribute_matches, r.num_attributes, r.option_matches, r.price_ok) == (0, 0, 1, True)
    assert r.total == 2 / 3


@pytest.mark.parametrize("cap", [0.0, -5.0])
def test_goal_without_a_positive_cap_original_crashes_ours_is_price_not_ok(make_product, make_goal, cap) -> None:
    product, goal = _edge(make_product, make_goal, price_upper=cap)
    with pytest.raises(TypeError):
        _theirs(product, goal, 15.0, {"color": "black"}, OFFLINE.nouns)
    r = purchase_reward(product, goal, 15.0, {"color": "black"}, OFFLINE)
    assert r.price_ok is False and r.total == (2 + 1 + 0) / (3 + 2 + 1)  # machine wash, classic fit; black


def _spacy_nouns(package: str):
    import importlib

    nlp = importlib.import_module(package).load()
    return lambda text: [t.text.lower() for t in nlp(text) if t.pos_ in ("PNOUN", "NOUN", "PROPN")]


def test_reward_matches_the_reference_with_spacy_nouns() -> None:
    package = spacy_model_package()
    if package is None:
        pytest.skip("spaCy or an en_core_web_sm package is not installed (the nlp extra)")
    rule, nouns = noun_rule("spacy"), _spacy_nouns(package)
    assert rule.id.startswith("spacy-") and {"NOUN", "PROPN"} == NOUN_TAGS
    sample = cases(120)
    diffs = [(p.title, g.name) for p, g, x, o in sample if _ours(p, g, x, o, rule) != _theirs(p, g, x, o, nouns)]
    assert not diffs, diffs[:3]
