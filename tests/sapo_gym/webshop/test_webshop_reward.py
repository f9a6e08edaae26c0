"""WebShop's reward on hand-computed cases (type partial credit, attributes, options, price).

Cases whose type score depends on the noun rule pin ``OFFLINE`` (spaCy, when installed, is the default)."""

from __future__ import annotations

import pytest

from sapo_gym.webshop.nouns import OFFLINE, offline_nouns
from sapo_gym.webshop.reward import (
    attribute_matches,
    goal_option_keys,
    normalize_color,
    option_matches,
    purchase_reward,
    token_set_ratio,
    type_reward,
)


@pytest.mark.parametrize(
    "title, nouns",
    [
        (
            "Acme Cotton Men's T-Shirt, Black",
            ["acme", "cotton", "men", "shirt"],
        ),  # 's and t are 1-letter tokens; black is a colour
        ("Waterproof Portable Bluetooth Speaker 2 Pack", ["bluetooth", "speaker", "pack"]),
        ("the best of the new", []),
        ("Comfortable Washable Rug", ["rug"]),  # -able suffix adjectives
        ("Rug rug RUG", ["rug", "rug", "rug"]),  # repeats are kept (they count in the denominator)
    ],
)
def test_offline_nouns(title: str, nouns: list[str]) -> None:
    assert offline_nouns(title) == tuple(nouns)


def test_normalize_color_is_webshop_substring_rule() -> None:
    assert normalize_color("navy blue") == "blue"  # 'blue' precedes 'navy' in the list
    assert normalize_color("machine wash") == "ash"  # the substring quirk is kept on purpose
    assert normalize_color("x-large") == "x-large"


def test_token_set_ratio_matches_thefuzz_processing() -> None:
    assert token_set_ratio("Machine-Wash!", "machine wash") == 100
    assert token_set_ratio("large", "xx-large") == 100  # one token set inside the other
    # sorted sets: "of pack 2" vs "of pack 4" -> indel ratio 2*8/18 = 88.9 -> 89 (> 85: a match)
    assert token_set_ratio("pack of 2", "pack of 4") == 89
    assert token_set_ratio("8", "9") == 0


def test_token_set_ratio_drops_only_latin1_code_points() -> None:
    # thefuzz's force_ascii removes U+0080-U+00FF; other non-ASCII characters are non-alphanumeric
    # separators for default_process, so "sulfate™free" reads "sulfate free"
    assert token_set_ratio("sulfate\u2122free", "sulfate free") == 100
    # "é" (U+00E9) is removed, joining the letters around it: "caf" vs "cafe"; 2*3/7 = 85.7 -> 86
    assert token_set_ratio("caf\u00e9", "cafe") == 86
    assert token_set_ratio("\u201csoft\u201d", "soft") == 100  # curly quotes separate
    assert token_set_ratio("\u00e9\u00e8", "") == 0  # all removed: empty vs empty scores 0


def test_goal_option_pairs_as_the_original_scores_them(make_goal) -> None:
    goal = make_goal(goal_options=["large", "white"], option_names=("size", "color"))
    assert goal_option_keys(goal) == [("size", "large"), ("color", "white")]
    assert goal_option_keys(make_goal()) == ["black", "xx-large"]  # human goals: values
    assert normalize_color(("color", "white")) == "white"  # a part equals a colour
    assert normalize_color(("color", "navy blue")) == ("color", "navy blue")  # no part equals one
    # str(pair) = "('size', 'large')" -> "size large"; tokens {x, large} vs {size, large}: the best of
    # "large" vs "large x" (2*5/12 = 83.3), vs "large size" (10/15), "large x" vs "large size" (12/17) -> 83
    assert token_set_ratio("x-large", ("size", "large")) == 83
    assert option_matches(["x-large"], [("size", "large")]) == 0
    assert option_matches(["large"], [("size", "large")]) == 1
    assert option_matches(["large"], [("size", "x-large")]) == 1  # {large} inside {size, x, large}
    assert option_matches(["navy blue"], [("color", "navy blue")]) == 1  # "blue" inside {color, navy, blue}


def test_type_reward_query_match(make_product, make_goal) -> None:
    assert type_reward(make_product(), make_goal(), OFFLINE) == (1.0, True, True, 1.0)


def test_type_reward_partial_credit(make_product, make_goal) -> None:
    # no query match, 1 shared category, 1 of 7 goal nouns (1/7 = 0.143): not a match -> 0.5
    goal = make_goal(
        query="men's shirt", name="Acme Crew Shirt Tee Top Polo Pack", product_category="Clothing › Boys › Tops"
    )
    product = make_product(title="Acme Rain Jacket")
    r_type, query_match, category_match, title_score = type_reward(product, goal, OFFLINE)
    assert (r_type, query_match, category_match) == (0.5, False, False)
    assert title_score == pytest.approx(1 / 7)
    # 1 of 11 nouns (< 0.1) -> 0.1; none -> 0.0
    long_name = "Acme Crew Shirt Tee Top Polo Pack Gift Box Set Bundle"
    assert type_reward(product, make_goal(query="x", name=long_name, product_category="Other"), OFFLINE)[0] == 0.1
    assert (
        type_reward(make_product(title="Zen Rain Jacket"), make_goal(query="x", product_category="Other"), OFFLINE)[0]
        == 0.0
    )
    # 2 shared categories make a match even when few title nouns overlap (1/7 >= 0.1)
    goal = make_goal(query="x", name="Acme Crew Shirt Tee Top Polo Pack", product_category="Clothing › Men › Tops")
    assert type_reward(product, goal, OFFLINE)[:3] == (1.0, False, True)


def test_type_reward_goal_without_nouns_counts_a_fifth(make_product, make_goal) -> None:
    r_type, _, _, title_score = type_reward(
        make_product(), make_goal(name="the best of the new", query="x", product_category="A"), OFFLINE
    )
    assert (r_type, title_score) == (0.5, 0.2)  # 0.2 is not > 0.2: no match


def test_attribute_matches_fuzzy_then_text(make_product) -> None:
    product = make_product()
    assert attribute_matches(product, ["machine wash"]) == 1  # product attribute, ratio 100
    assert attribute_matches(product, ["classic fit"]) == 1  # substring of the description
    assert attribute_matches(product, ["crew neck"]) == 1  # substring of the bullet points (lower-cased)
    assert attribute_matches(product, ["waterproof"]) == 0


def test_option_matches_colour_normalised(make_product) -> None:
    assert option_matches(["navy blue"], ["blue"]) == 1
    assert option_matches(["black", "large"], ["black", "xx-large"]) == 2
    assert option_matches(["black"], ["white"]) == 0
    assert option_matches([], ["black"]) == 0


def test_purchase_reward_total(make_product, make_goal) -> None:
    # attrs 2/3 (machine wash, classic fit), options 2/2 (black, large~xx-large), price 15 <= 20, r_type 1
    r = purchase_reward(
        make_product(), make_goal(), price=15.0, options={"color": "black", "size": "large"}, nouns=OFFLINE
    )
    assert (r.attribute_matches, r.option_matches, r.price_ok, r.r_type) == (2, 2, True, 1.0)
    assert r.total == pytest.approx(5 / 6)


def test_purchase_reward_price_and_missing_options(make_product, make_goal) -> None:
    r = purchase_reward(make_product(), make_goal(), price=20.01, options={}, nouns=OFFLINE)
    assert (r.attribute_matches, r.option_matches, r.price_ok) == (2, 0, False)
    assert r.total == pytest.approx(2 / 6)
    perfect = purchase_reward(
        make_product(),
        make_goal(attributes=["machine wash"], goal_options=["black"]),
        20.0,
        {"color": "black"},
        nouns=OFFLINE,
    )
    assert perfect.total == 1.0


def test_purchase_reward_scaled_by_type(make_product, make_goal) -> None:
    goal = make_goal(
        query="men's shirt",
        name="Acme Crew Shirt Tee Top Polo Pack",
        product_category="Clothing › Boys › Tops",
        attributes=["machine wash"],
        goal_options=["black"],
    )
    r = purchase_reward(make_product(title="Acme Rain Jacket"), goal, 15.0, {"color": "black"}, OFFLINE)
    assert r.total == pytest.approx(0.5)  # (1 + 1 + 1) / 3 * 0.5


def test_synthetic_goal_size_neighbour_is_not_a_match(make_product, make_goal) -> None:
    # the example: goal {size: large}, bought x-large -> (1 attr + 0 options + price) / 3 = 0.667
    goal = make_goal(attributes=["machine wash"], goal_options=["large"], option_names=("size",))
    r = purchase_reward(make_product(), goal, 15.0, {"size": "x-large"}, OFFLINE)
    assert (r.attribute_matches, r.option_matches, r.price_ok) == (1, 0, True)
    assert r.total == pytest.approx(2 / 3)  # exact fraction; approx only for the float division
    assert purchase_reward(make_product(), goal, 15.0, {"size": "large"}, OFFLINE).total == 1.0
