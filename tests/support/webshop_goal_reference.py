"""WebShop's purchase reward restated from documented facts, for the differential test.

Written from the facts below, not from ``sapo_gym.webshop.reward`` (which it must agree with) nor
by copying the original. It works on the original's own record shapes: a purchased product
``{"query", "product_category", "name", "Title", "Attributes", "BulletPoints", "Description"}``
and a goal ``{"query", "product_category", "name", "attributes", "goal_options", "price_upper"}``
whose ``goal_options`` is a list of values (human goals) or a ``{name: value}`` dict (synthetic).
Where the original raises, this raises the same exception type.

Facts of ``web_agent_site/engine/goal.py`` (princeton-nlp/WebShop, master, commit d149d0d):

F1. ``get_reward`` = (attribute matches + option matches + r_price) / (len(goal attributes) +
    len(goal options) + 1), times r_type. r_price is the bool ``price <= price_upper`` when
    ``price_upper > 0``, else ``None`` (and ``None`` in the sum raises ``TypeError``).
F2. Attributes: per goal attribute g, one match when some product attribute p has
    ``token_set_ratio(p, g) > 85``; else one match when g (as given) is a substring of the
    lower-cased Title, of the lower-cased space-joined BulletPoints or of the lower-cased
    Description. The attribute reward divides by len(goal attributes): ``ZeroDivisionError``
    when the goal has none.
F3. Options: the purchased side is ``list(options.values())``; the goal side is
    ``goal_options.items()`` for a dict (``(name, value)`` tuples), else the list itself. Both
    sides go through ``normalize_color``; a goal option counts once when some purchased option
    has ``token_set_ratio(purchased, goal) > 85``.
F4. ``normalize_color(x)`` returns the first colour c of WebShop's COLOR_SET (its order) for
    which Python's ``c in x`` holds, else x: a substring test for a str, an element-equality
    test for a tuple.
F5. Type: query_match = the two ``query`` strings are equal; category_match = the sets of
    ``›``-separated, stripped breadcrumb parts share ≥ 2 elements; nouns = lower-cased text of
    the tokens tagged NOUN or PROPN (the original also lists the non-tag PNOUN) by spaCy;
    title_score = |set(purchased nouns) ∩ set(goal nouns)| / len(goal nouns) (repeats counted
    in the denominator), 0.2 when the goal name has no nouns; r_type = 1.0 if query_match or
    category_match or title_score > 0.2, else 0.5; then 0.1 if title_score < 0.1; then 0.0 if
    title_score == 0.0.

Facts of thefuzz 0.19.0, the version WebShop's requirements pin (and install without
python-Levenshtein, so its ratio is the standard library's ``difflib.SequenceMatcher``):

T1. ``fuzz.token_set_ratio(a, b)`` turns each input into ``str(x)``, removes every code point in
    U+0080–U+00FF (``force_ascii``), replaces each ``\\W`` character (Python's Unicode-aware
    class: ``_`` is a word character) with a space, lower-cases and trims.
T2. An empty processed side scores 0. With the whitespace-split token sets, S = the sorted
    intersection joined by spaces, A, B = each side's sorted remaining tokens, CA = (S + " " +
    A) trimmed, CB likewise, the score is the largest of ratio(S, CA), ratio(S, CB) and
    ratio(CA, CB).
T3. ratio(x, y) is 100 when x == y, else 0 when either is empty, else
    ``int(round(100 * SequenceMatcher(None, x, y).ratio()))``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from difflib import SequenceMatcher
from typing import Any

COLOURS = (
    "alabaster apricot aqua ash asphalt azure banana beige black blue blush bordeaux bronze brown burgundy camel "
    "camo caramel champagne charcoal cheetah chestnut chocolate christmas coffee cognac copper coral cranberry cream "
    "crystal dark denim eggplant elephant espresso fuchsia gold granite grape graphite grass gray green grey heather "
    "indigo ivory ivy khaki lavender lemon leopard light lilac lime magenta maroon mauve merlot midnight mint mocha "
    "multicolor mushroom mustard natural navy nude olive orange peach pewter pink plum purple rainbow red rose royal "
    "rust sand sapphire seashell silver skull slate steel stone stonewash sunflower tan taupe teal tiger turquoise "
    "violet walnut wheat white wine yellow"
).split()
"""WebShop's ``normalize.COLOR_SET``, in its order (written out again here from the original's list)."""


def clean(value: object) -> str:
    """T1."""
    text = "".join(ch for ch in str(value) if not 0x80 <= ord(ch) <= 0xFF)
    return "".join(" " if re.fullmatch(r"\W", ch) else ch for ch in text).lower().strip()


def ratio(x: str, y: str) -> int:
    """T3."""
    if x == y:
        return 100
    return 0 if not x or not y else int(round(100 * SequenceMatcher(None, x, y).ratio()))


def token_set_ratio(a: object, b: object) -> int:
    """T1–T2."""
    pa, pb = clean(a), clean(b)
    if not pa or not pb:
        return 0
    ta, tb = set(pa.split()), set(pb.split())
    s = " ".join(sorted(ta & tb))
    ca = (s + " " + " ".join(sorted(ta - tb))).strip()
    cb = (s + " " + " ".join(sorted(tb - ta))).strip()
    return max(ratio(s, ca), ratio(s, cb), ratio(ca, cb))


def normalize_color(x: Any) -> Any:
    """F4."""
    return next((c for c in COLOURS if c in x), x)


def type_reward(purchased: dict, goal: dict, nouns: Callable[[str], Sequence[str]]) -> dict[str, Any]:
    """F5."""
    query_match = purchased["query"] == goal["query"]
    parts = [{p.strip() for p in r["product_category"].split("›")} for r in (purchased, goal)]
    category_match = len(parts[0] & parts[1]) >= 2
    have, want = list(nouns(purchased["name"])), list(nouns(goal["name"]))
    title_score = 0.2 if not want else len(set(have) & set(want)) / len(want)
    r_type = 1.0 if (query_match or category_match or title_score > 0.2) else 0.5
    r_type = 0.1 if title_score < 0.1 else r_type
    r_type = 0.0 if title_score == 0.0 else r_type
    return {"r_type": r_type, "query_match": query_match, "category_match": category_match, "title_score": title_score}


def attribute_matches(purchased: dict, goal: dict) -> int:
    """F2 (raises ZeroDivisionError for a goal without attributes, as the original's r_att does)."""
    texts = (purchased["Title"].lower(), " ".join(purchased["BulletPoints"]).lower(), purchased["Description"].lower())
    n = 0
    for g in goal["attributes"]:
        if any(token_set_ratio(p, g) > 85 for p in purchased["Attributes"]) or any(g in t for t in texts):
            n += 1
    _ = n / len(goal["attributes"])
    return n


def option_matches(options: dict[str, str], goal: dict) -> int:
    """F3."""
    wanted = goal["goal_options"]
    wanted = list(wanted.items()) if isinstance(wanted, dict) else list(wanted)
    chosen = [normalize_color(v) for v in options.values()]
    return sum(1 for g in (normalize_color(w) for w in wanted) if any(token_set_ratio(c, g) > 85 for c in chosen))


def get_reward(
    purchased: dict, goal: dict, price: float, options: dict[str, str], nouns: Callable[[str], Sequence[str]]
) -> tuple[float, dict[str, Any]]:
    """F1: the total and its parts."""
    kind = type_reward(purchased, goal, nouns)
    r_price = (price <= goal["price_upper"]) if goal["price_upper"] > 0 else None
    n_attr = attribute_matches(purchased, goal)
    n_opt = option_matches(options, goal)
    total = (n_attr + n_opt + r_price) / (len(goal["attributes"]) + len(goal["goal_options"]) + 1) * kind["r_type"]
    return total, dict(kind, attribute_matches=n_attr, option_matches=n_opt, price_ok=bool(r_price))
