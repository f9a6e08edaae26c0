"""WebShop's own ``tests/web-agent-site/engine/test_goal.py`` expectations, on our reward.

Ported from both versions of that file (the first commit, whose type-score pairs expect 0.85 /
0.31 / 0.17, and master, which expects 0.333 / 0.3 / 0.15 on other pairs), with its tolerances
(``abs_tol=1e-2``). Everything that does not depend on the noun tagger is asserted exactly as
the original asserts it. The title scores depend on the tagger: the original's expectations were
written against a spaCy model of 2022 (master's goal.py loaded ``en_core_web_lg`` until
2024-05-25, ``en_core_web_sm`` since), so for each rule this file asserts the exact fraction it
gives, derived from the nouns it finds, and whether the original's expectation holds for it.
"""

from __future__ import annotations

from math import isclose

import pytest

from sapo_gym.webshop.catalog import Goal, Product
from sapo_gym.webshop.nouns import OFFLINE, NounRule, noun_rule, spacy_model_package
from sapo_gym.webshop.reward import attribute_matches, option_matches, purchase_reward, type_reward

TEA = ["tea tree", "essential oils", "natural ingredients"]


def product(**fields: object) -> Product:
    base: dict[str, object] = dict(
        asin="B0",
        title="",
        category="c",
        query="Query 1",
        product_category="a › b › c",
        pricing=(35.0,),
        price_tag="$35",
        options={},
        attributes=[],
        bullet_points=[],
        description="",
    )
    base.update(fields)
    return Product(**base)  # type: ignore[arg-type]


def goal(**fields: object) -> Goal:
    base: dict[str, object] = dict(
        asin="B0",
        category="c",
        query="Query 1",
        name="Name 1",
        product_category="a › b › c",
        instruction_text="",
        attributes=list(TEA),
        price_upper=40.0,
        goal_options=[],
    )
    base.update(fields)
    return Goal(**base)  # type: ignore[arg-type]


def _rules() -> list[NounRule]:
    return [OFFLINE] + ([noun_rule("spacy")] if spacy_model_package() else [])


# ------------------------------------------------------------------ get_type_reward: tagger-independent cases
@pytest.mark.parametrize("rule", _rules(), ids=lambda r: r.id)
def test_type_reward_exact_query_and_categories(rule: NounRule) -> None:
    assert type_reward(product(title="Name 1"), goal(), rule) == (1.0, True, True, 1)
    assert type_reward(product(title="Name 1", query="Query 2"), goal(), rule)[1] is False
    for breadcrumb, match in [
        ("b › c › a", True),
        ("d › e › f", False),
        ("a › d › b", True),
        ("a › a › b", True),
        ("a › a › d", False),
    ]:
        assert type_reward(product(title="Name 1", product_category=breadcrumb), goal(), rule)[2] is match, breadcrumb


# ------------------------------------------------------------------ get_type_reward: title scores
ADIDAS = ("adidas Unisex-Adult D.o.n. Issue 2 Basketball Shoe", "adidas Unisex-Adult D.o.n. Issue 2 Indoor Court Shoe")
PEAK = (
    "Mens D.O.N. Issue 2 Gca Basketball Sneakers Shoes Casual - Off White",
    "PEAK High Top Mens Basketball Shoes Lou Williams Streetball Master Breathable Non Slip Outdoor Sneakers",
)
CORD = "BRST AC Power Cord Outlet Socket Cable Plug Lead for Panasonic SC-HT830V DVD/VCR Combo Home Theater System"
SOUNDBAR = "Saireed UL Listed 2 Prong Power Cord for JBL Bar 3.1 Bar 2.1 Channel 4K Ultra HD Soundbar"
SUBWOOFER = SOUNDBAR + " Home Theater System Subwoofer"
KNOB = (
    "Rusticware 921ORB Kitchen and Bath Cabinet Knob",
    "Minkissy 2pcs Stainless Steel Eyebrow Tweezers Blackhead Acne Remover Portable Makeup Tweezers (Silver)",
)

# (goal name, purchased name, the original's expectation, offline-v1's score, spaCy 3.8.x + en_core_web_sm 3.8.0's
# score, whether the expectation holds within abs_tol=1e-2 for both rules)
TITLE_CASES = [
    # first version of test_goal.py
    (*ADIDAS, 0.85, 5 / 6, 5 / 6, False),
    (SUBWOOFER, CORD, 0.31, 5 / 16, 5 / 16, True),
    (SOUNDBAR, CORD, 0.17, 2 / 12, 2 / 12, True),
    # master's test_goal.py
    (*PEAK, 0.333, 4 / 6, 4 / 10, False),
    (SUBWOOFER, CORD, 0.3, 5 / 16, 5 / 16, False),
    (SOUNDBAR, CORD, 0.15, 2 / 12, 2 / 12, False),
]
# Derivations: the score is |set(purchased nouns) & set(goal nouns)| / |goal nouns|.
# ADIDAS     both rules: 6 goal nouns (offline: adidas unisex adult issue basketball shoe; spaCy: unisex adult
#            d.o.n issue basketball shoe), all but basketball shared -> 5/6 = 0.833 (the original expected 6/7's 0.857)
# SUBWOOFER  both: 16 goal nouns, shared power cord home theater system -> 5/16 = 0.3125
# SOUNDBAR   both: 12 goal nouns, shared power cord -> 2/12 = 0.167
# PEAK       offline: mens issue gca basketball sneakers shoes (6), shared mens basketball sneakers shoes -> 4/6;
#            spaCy: mens d.o.n. issue gca basketball sneakers shoes casual off white (10), the same 4 -> 4/10


def _case_id(case: tuple) -> str:
    return f"{case[0][:18]}~{case[2]}"


@pytest.mark.parametrize("case", TITLE_CASES, ids=_case_id)
def test_title_scores_offline(case: tuple) -> None:
    goal_name, bought, expected, offline, _, holds = case
    score = type_reward(product(title=bought, query="x"), goal(name=goal_name), OFFLINE)[3]
    assert score == offline
    assert isclose(score, expected, abs_tol=1e-2) is holds


@pytest.mark.parametrize("case", TITLE_CASES, ids=_case_id)
def test_title_scores_spacy(case: tuple) -> None:
    if spacy_model_package() is None:
        pytest.skip("spaCy or an en_core_web_sm package is not installed (the nlp extra)")
    rule = noun_rule("spacy")
    if not rule.id.startswith("spacy-3.8.") or not rule.id.endswith("-3.8.0"):
        pytest.skip(f"the exact fractions below are spaCy 3.8 / en_core_web_sm 3.8.0's; this is {rule.id}")
    goal_name, bought, expected, _, spacy_score, holds = case
    score = type_reward(product(title=bought, query="x"), goal(name=goal_name), rule)[3]
    assert score == spacy_score
    assert isclose(score, expected, abs_tol=1e-2) is holds


@pytest.mark.parametrize("rule", _rules(), ids=lambda r: r.id)
def test_completely_different_titles(rule: NounRule) -> None:
    assert type_reward(product(title=KNOB[1], query="x"), goal(name=KNOB[0]), rule)[3] < 0.05


# ------------------------------------------------------------------ get_attribute_reward
def test_attribute_reward_cases() -> None:
    assert attribute_matches(product(attributes=["tea tree", "essential oil", "natural ingredients"]), TEA) == 3
    assert attribute_matches(product(attributes=["essential oil", "natural ingredients"]), TEA) == 2
    found_in_text = product(
        bullet_points=["This shampoo has essential oils and smells like lemons"],
        description="Best shampoo on the market, made with natural ingredients",
    )
    assert attribute_matches(found_in_text, TEA) == 2
    no_match = product(
        attributes=["tea bag", "earl gray", "lipton"],
        title="English tea for breakfast",
        bullet_points=["Soothing aroma", "Calming, great feeling"],
        description="Best tea made by Lipton, great to pair with breakfast",
    )
    assert attribute_matches(no_match, TEA) == 0


# ------------------------------------------------------------------ get_option_reward
@pytest.mark.parametrize(
    "goal_options, purchased, matches",
    [
        (["grey", "XL", "pack of 12"], ["pack of 12", "grey", "XL"], 3),  # exact
        (["grey", "XL", "pack of 12"], ["pack of 12", "blue", "XL"], 2),  # partial
        (["cool powder snow", "XL", "pack of 12"], ["pack of 12", "powder snow", "XL"], 3),  # fuzzy
        ([], ["goal 1", "goal 2"], 0),  # empty goal options (the original's r_option is None)
        (["goal 1", "goal 2"], [], 0),  # empty purchased options
    ],
)
def test_option_reward_cases(goal_options: list[str], purchased: list[str], matches: int) -> None:
    assert option_matches(purchased, goal_options) == matches


# ------------------------------------------------------------------ get_reward
MENS = "Mens D.O.N. Issue 2 Gca Basketball Sneakers Shoes Casual - Off White"


@pytest.mark.parametrize("rule", _rules(), ids=lambda r: r.id)
def test_get_reward_cases(rule: NounRule) -> None:
    options = {"color": "grey", "size": "XL"}
    g = goal(name=MENS, goal_options=["grey", "XL"], option_names=("color", "size"))
    p = product(title=MENS, attributes=["tea tree", "essential oil", "natural ingredients"])
    assert purchase_reward(p, g, 35, options, rule).total == 1
    # the original sets BulletPoints to a *string*, which its " ".join spreads letter by letter, so
    # "essential oils" is not found there: bullets modelled as that string's characters
    text = "This shampoo has essential oils and smells like lemons"
    p = product(
        title=MENS, bullet_points=list(text), description="Best shampoo on the market, made with natural ingredients"
    )
    # (1 attribute + 2 options + price) / (3 + 2 + 1)
    assert isclose(purchase_reward(p, g, 35, options, rule).total, 2 / 3, abs_tol=1e-2)
    g3 = goal(name=MENS, goal_options=["grey", "XL", "pack of 12"], option_names=("color", "size", "amount"))
    # (1 + 2 + 1) / (3 + 3 + 1) = 0.5714
    assert isclose(purchase_reward(p, g3, 35, options, rule).total, 0.5714, abs_tol=1e-2)
    g4 = goal(name=SOUNDBAR, goal_options=g3.goal_options, option_names=g3.option_names)
    p4 = product(
        title=CORD, query="Query 2", product_category="a › d › e", bullet_points=list(text), description=p.description
    )
    # title score 2/12 with both rules: r_type 0.5 -> 0.5714 x 0.5 = 0.2857
    assert isclose(purchase_reward(p4, g4, 35, options, rule).total, 0.2857, abs_tol=1e-2)
