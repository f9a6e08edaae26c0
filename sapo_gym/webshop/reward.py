"""WebShop's purchase reward (``web_agent_site/engine/goal.py``, ``get_reward``).

``total = (attribute matches + option matches + price ok) / (n attributes + n options + 1) × r_type``

* **type** (``r_type``): 1.0 when the purchase matches the goal's query, or shares ≥ 2 breadcrumb
  categories, or more than 20 % of the goal title's nouns; 0.5 otherwise; then 0.1 when under
  10 % of the nouns match and 0.0 when none do (no nouns at all in the goal title counts 20 %).
  The nouns come from the rule passed in (an env's: its catalog's spaCy table, :mod:`.noun_table`);
* **attributes**: a goal attribute matches when some product attribute has a fuzzy token-set
  ratio > 85 with it, or when it is a substring of the lower-cased title, bullet points (joined
  by spaces) or description;
* **options**: a goal option matches when some chosen option value has a token-set ratio > 85
  with it, both colour-normalised. A goal that names its options (WebShop's synthetic goals keep
  them as ``{name: value}``) is scored on the ``(name, value)`` pairs, as the original's
  ``.items()`` does: a pair normalises to a colour only when its name or value *equals* one
  (tuple membership), and thefuzz compares ``str(pair)``, i.e. ``"('size', 'large')"`` →
  ``"size large"``, against the chosen value. So ``{size: large}`` bought ``x-large`` scores
  83 (``{x, large}`` vs ``{size, large}``: no match), bought ``large`` 100 (a subset);
* **price**: the paid price is ≤ the goal's cap.

Fuzzy scores are ``token_set_ratio`` of thefuzz 0.19.0, the version WebShop pins, as its
requirements install it (without python-Levenshtein, so on the standard library's
``difflib.SequenceMatcher``): ``str()`` of each input, code points U+0080–U+00FF removed
(``force_ascii``; ``™`` and curly quotes stay and become separators), every run of ``\\W``
characters (Unicode-aware; ``_`` is a word character) to one space, lower-cased, trimmed; 0 when
either side is then empty; else the best of the three ratios between the sorted token
intersection and each side's intersection-plus-rest, each ``int(round(100 × ratio))`` (100 for
equal strings, 0 when one is empty).

Where the original crashes, a choice: a goal without attributes (``ZeroDivisionError`` in its
``r_att``) is scored by the same total, with 0 attribute matches over 0 attributes; a goal cap
≤ 0 (its ``r_price`` is ``None`` and the sum raises) counts as price not ok.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from difflib import SequenceMatcher

from sapo_gym.webshop.catalog import Goal, Product
from sapo_gym.webshop.nouns import NounRule

__all__ = [
    "COLOR_SET",
    "GoalOption",
    "normalize_color",
    "token_set_ratio",
    "goal_option_keys",
    "type_reward",
    "attribute_matches",
    "option_matches",
    "RewardBreakdown",
    "purchase_reward",
]

COLOR_SET = (
    "alabaster",
    "apricot",
    "aqua",
    "ash",
    "asphalt",
    "azure",
    "banana",
    "beige",
    "black",
    "blue",
    "blush",
    "bordeaux",
    "bronze",
    "brown",
    "burgundy",
    "camel",
    "camo",
    "caramel",
    "champagne",
    "charcoal",
    "cheetah",
    "chestnut",
    "chocolate",
    "christmas",
    "coffee",
    "cognac",
    "copper",
    "coral",
    "cranberry",
    "cream",
    "crystal",
    "dark",
    "denim",
    "eggplant",
    "elephant",
    "espresso",
    "fuchsia",
    "gold",
    "granite",
    "grape",
    "graphite",
    "grass",
    "gray",
    "green",
    "grey",
    "heather",
    "indigo",
    "ivory",
    "ivy",
    "khaki",
    "lavender",
    "lemon",
    "leopard",
    "light",
    "lilac",
    "lime",
    "magenta",
    "maroon",
    "mauve",
    "merlot",
    "midnight",
    "mint",
    "mocha",
    "multicolor",
    "mushroom",
    "mustard",
    "natural",
    "navy",
    "nude",
    "olive",
    "orange",
    "peach",
    "pewter",
    "pink",
    "plum",
    "purple",
    "rainbow",
    "red",
    "rose",
    "royal",
    "rust",
    "sand",
    "sapphire",
    "seashell",
    "silver",
    "skull",
    "slate",
    "steel",
    "stone",
    "stonewash",
    "sunflower",
    "tan",
    "taupe",
    "teal",
    "tiger",
    "turquoise",
    "violet",
    "walnut",
    "wheat",
    "white",
    "wine",
    "yellow",
)
"""WebShop's colour list, in its order (the first contained colour wins)."""

GoalOption = str | tuple[str, str]
"""A goal option as the original scores it: a value, or a ``(name, value)`` pair."""

_LATIN1 = dict.fromkeys(range(0x80, 0x100))
_NON_WORD = re.compile(r"\W+")


def normalize_color(option: GoalOption) -> GoalOption:
    """The first colour of :data:`COLOR_SET` ``in`` the option, else the option unchanged.

    ``in`` is Python's: a substring test on a value, an equality test on each part of a pair."""
    for colour in COLOR_SET:
        if colour in option:
            return colour
    return option


def _process(value: object) -> str:
    return _NON_WORD.sub(" ", str(value).translate(_LATIN1)).lower().strip()


def _ratio(a: str, b: str) -> int:
    if a == b:
        return 100
    if not a or not b:
        return 0
    return int(round(100 * SequenceMatcher(None, a, b).ratio()))


def token_set_ratio(a: object, b: object) -> int:
    """thefuzz 0.19.0's ``token_set_ratio`` (see the module docstring): an int in [0, 100]."""
    left, right = _process(a), _process(b)
    if not left or not right:
        return 0
    tokens_a, tokens_b = set(left.split()), set(right.split())
    common = " ".join(sorted(tokens_a & tokens_b))
    with_a = f"{common} {' '.join(sorted(tokens_a - tokens_b))}".strip()
    with_b = f"{common} {' '.join(sorted(tokens_b - tokens_a))}".strip()
    return max(_ratio(common, with_a), _ratio(common, with_b), _ratio(with_a, with_b))


def goal_option_keys(goal: Goal) -> list[GoalOption]:
    """What the goal's options are scored as: ``(name, value)`` pairs when the goal names them, else values."""
    if goal.option_names:
        return list(zip(goal.option_names, goal.goal_options))
    return list(goal.goal_options)


def type_reward(product: Product, goal: Goal, rule: NounRule) -> tuple[float, bool, bool, float]:
    """(r_type, query_match, category_match, title_score) of buying ``product`` for ``goal``, nouns by ``rule``."""
    query_match = product.query == goal.query
    bought = {c.strip() for c in product.product_category.split("›")}
    wanted = {c.strip() for c in goal.product_category.split("›")}
    category_match = len(bought & wanted) >= 2
    desired = rule.nouns(goal.name)
    title_score = len(set(rule.nouns(product.title)) & set(desired)) / len(desired) if desired else 0.2
    r_type = 1.0 if (query_match or category_match or title_score > 0.2) else 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type, query_match, category_match, title_score


def attribute_matches(product: Product, goal_attributes: Iterable[str]) -> int:
    """How many goal attributes the product has (fuzzy on its attributes, else a text substring)."""
    title, bullets, description = (
        product.title.lower(),
        " ".join(product.bullet_points).lower(),
        product.description.lower(),
    )
    count = 0
    for wanted in goal_attributes:
        if (
            any(token_set_ratio(have, wanted) > 85 for have in product.attributes)
            or wanted in title
            or wanted in bullets
            or wanted in description
        ):
            count += 1
    return count


def option_matches(chosen: Iterable[str], goal_options: Iterable[GoalOption]) -> int:
    """How many goal options (values or pairs) some chosen value matches (colour-normalised, fuzzy > 85)."""
    chosen = [normalize_color(o) for o in chosen]
    return sum(any(token_set_ratio(c, normalize_color(g)) > 85 for c in chosen) for g in goal_options)


@dataclass(frozen=True)
class RewardBreakdown:
    """The score of a purchase and its parts (WebShop's ``verbose`` info)."""

    total: float
    r_type: float
    query_match: bool
    category_match: bool
    title_score: float
    attribute_matches: int
    num_attributes: int
    option_matches: int
    num_options: int
    price_ok: bool

    def lines(self) -> list[str]:
        """Human-readable lines for the done page."""
        return [
            f"type: {self.r_type:g} (query match: {self.query_match}, category match: {self.category_match}, "
            f"title nouns: {self.title_score:.2f})",
            f"attributes: {self.attribute_matches}/{self.num_attributes}",
            f"options: {self.option_matches}/{self.num_options}",
            f"price within budget: {self.price_ok}",
        ]


def purchase_reward(
    product: Product, goal: Goal, price: float, options: dict[str, str], nouns: NounRule
) -> RewardBreakdown:
    """WebShop's ``get_reward`` for buying ``product`` at ``price`` with the chosen ``options`` (name → value)."""
    r_type, query_match, category_match, title_score = type_reward(product, goal, nouns)
    price_ok = price <= goal.price_upper if goal.price_upper > 0 else False
    n_attr = attribute_matches(product, goal.attributes)
    n_opt = option_matches(list(options.values()), goal_option_keys(goal))
    total = (n_attr + n_opt + int(price_ok)) / (len(goal.attributes) + len(goal.goal_options) + 1) * r_type
    return RewardBreakdown(
        total,
        r_type,
        query_match,
        category_match,
        title_score,
        n_attr,
        len(goal.attributes),
        n_opt,
        len(goal.goal_options),
        price_ok,
    )
