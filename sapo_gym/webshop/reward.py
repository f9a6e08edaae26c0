"""WebShop's purchase reward (``web_agent_site/engine/goal.py``), without spaCy.

``total = (attribute matches + option matches + price ok) / (n attributes + n options + 1) × r_type``

* **type** (``r_type``): 1.0 when the purchase matches the goal's query, or shares ≥ 2 breadcrumb
  categories, or more than 20 % of the goal title's nouns; 0.5 otherwise; then 0.1 when under
  10 % of the nouns match and 0.0 when none do (no nouns at all in the goal title counts 20 %);
* **attributes**: a goal attribute matches when some product attribute has a fuzzy token-set
  ratio > 85 with it, or when it is a substring of the lower-cased title, bullet points or
  description;
* **options**: colour-normalised, a goal option matches when some chosen option has a token-set
  ratio > 85 with it;
* **price**: the paid price is ≤ the goal's cap.

Fuzzy scores are ``thefuzz``'s: ASCII-only, lower-cased, punctuation to spaces, rounded to an int.

Deviation: WebShop picks title nouns with spaCy's ``en_core_web_sm`` tagger (a model download).
:func:`title_nouns` is an offline rule instead: word tokens (letters only, ≥ 2 characters) that
are neither closed-class words nor adjectives (a colour/size/product-adjective lexicon plus the
adjective suffixes -ous, -ful, -less, -able, -ible, -ive). Capitalised title words, which spaCy
mostly tags PROPN, count as nouns unless they are such adjectives.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

from sapo_gym.webshop.catalog import Goal, Product

__all__ = ["COLOR_SET", "normalize_color", "token_set_ratio", "title_nouns", "type_reward", "attribute_matches",
           "option_matches", "RewardBreakdown", "purchase_reward"]

COLOR_SET = (
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure", "banana", "beige", "black", "blue", "blush", "bordeaux",
    "bronze", "brown", "burgundy", "camel", "camo", "caramel", "champagne", "charcoal", "cheetah", "chestnut",
    "chocolate", "christmas", "coffee", "cognac", "copper", "coral", "cranberry", "cream", "crystal", "dark", "denim",
    "eggplant", "elephant", "espresso", "fuchsia", "gold", "granite", "grape", "graphite", "grass", "gray", "green",
    "grey", "heather", "indigo", "ivory", "ivy", "khaki", "lavender", "lemon", "leopard", "light", "lilac", "lime",
    "magenta", "maroon", "mauve", "merlot", "midnight", "mint", "mocha", "multicolor", "mushroom", "mustard", "natural",
    "navy", "nude", "olive", "orange", "peach", "pewter", "pink", "plum", "purple", "rainbow", "red", "rose", "royal",
    "rust", "sand", "sapphire", "seashell", "silver", "skull", "slate", "steel", "stone", "stonewash", "sunflower", "tan",
    "taupe", "teal", "tiger", "turquoise", "violet", "walnut", "wheat", "white", "wine", "yellow",
)
"""WebShop's colour list, in its order (the first contained colour wins)."""

_CLOSED_CLASS = frozenset(
    "a an the and or but nor for so yet of in on at to from by with without into onto over under up down out off "
    "about above below between through during per via as than then that this these those it its is are was were be "
    "been being has have had do does did can could will would shall should may might must not no yes very too also "
    "i you he she we they me him her us them my your his our their who whom which what when where why how all any "
    "both each few more most other some such only own same just x".split()
)
_ADJECTIVES = frozenset(
    "black white red blue green yellow pink purple grey gray brown beige navy orange gold silver tan ivory khaki "
    "small medium large big little mini tiny extra xl xxl long short tall high low wide narrow thin thick slim "
    "new old best better good great perfect premium classic modern vintage cute pretty elegant casual formal "
    "soft hard smooth rough light dark bright clear deep heavy strong solid pure fresh natural organic raw "
    "easy quick fast slow simple smart safe non anti free lightweight waterproof wireless portable electric "
    "digital automatic manual double single dual multi multiple super ultra universal warm cool hot cold dry wet "
    "sensitive oily gentle healthy vegan kosher genuine real original regular daily everyday instant compact "
    "wooden woolen silky matte glossy shiny rustic cozy luxury durable sturdy".split()
)
_ADJ_SUFFIXES = ("ous", "ful", "less", "able", "ible", "ive")
_WORD = re.compile(r"[a-z]+")


def normalize_color(text: str) -> str:
    """The first colour of :data:`COLOR_SET` contained in ``text`` (a substring test, as WebShop's), else ``text``."""
    for colour in COLOR_SET:
        if colour in text:
            return colour
    return text


def _process(text: str) -> str:
    return default_process(text.encode("ascii", "ignore").decode())


def token_set_ratio(a: str, b: str) -> int:
    """``thefuzz.fuzz.token_set_ratio``: processed (ASCII, lower-case, no punctuation), rounded to an int."""
    return int(round(fuzz.token_set_ratio(_process(a), _process(b))))


def title_nouns(title: str) -> list[str]:
    """The title's nouns, lower-cased, in order, with repeats (see the module docstring)."""
    nouns = []
    for word in _WORD.findall(title.lower()):
        if len(word) < 2 or word in _CLOSED_CLASS or word in _ADJECTIVES:
            continue
        if len(word) > 5 and word.endswith(_ADJ_SUFFIXES):
            continue
        nouns.append(word)
    return nouns


def type_reward(product: Product, goal: Goal) -> tuple[float, bool, bool, float]:
    """(r_type, query_match, category_match, title_score) of buying ``product`` for ``goal``."""
    query_match = product.query == goal.query
    bought = {c.strip() for c in product.product_category.split("›")}
    wanted = {c.strip() for c in goal.product_category.split("›")}
    category_match = len(bought & wanted) >= 2
    desired = title_nouns(goal.name)
    title_score = len(set(title_nouns(product.title)) & set(desired)) / len(desired) if desired else 0.2
    r_type = 1.0 if (query_match or category_match or title_score > 0.2) else 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type, query_match, category_match, title_score


def attribute_matches(product: Product, goal_attributes: Iterable[str]) -> int:
    """How many goal attributes the product has (fuzzy on its attributes, else a text substring)."""
    title, bullets, description = product.title.lower(), " ".join(product.bullet_points).lower(), product.description.lower()
    count = 0
    for wanted in goal_attributes:
        if any(token_set_ratio(have, wanted) > 85 for have in product.attributes):
            count += 1
        elif wanted in title or wanted in bullets or wanted in description:
            count += 1
    return count


def option_matches(chosen: Iterable[str], goal_options: Iterable[str]) -> int:
    """How many goal options some chosen option matches (colour-normalised, fuzzy > 85)."""
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


def purchase_reward(product: Product, goal: Goal, price: float, options: dict[str, str]) -> RewardBreakdown:
    """WebShop's ``get_reward`` for buying ``product`` at ``price`` with the chosen ``options``."""
    r_type, query_match, category_match, title_score = type_reward(product, goal)
    price_ok = price <= goal.price_upper if goal.price_upper > 0 else False
    n_attr = attribute_matches(product, goal.attributes)
    n_opt = option_matches(list(options.values()), goal.goal_options)
    total = (n_attr + n_opt + int(price_ok)) / (len(goal.attributes) + len(goal.goal_options) + 1) * r_type
    return RewardBreakdown(total, r_type, query_match, category_match, title_score, n_attr, len(goal.attributes),
                           n_opt, len(goal.goal_options), price_ok)
