"""The product catalog and the goals, read from WebShop's own JSON files (or the generator's).

WebShop ships three files; this module adapts them, once, into typed records:

* ``items_shuffle_1000.json`` / ``items_shuffle.json`` — a list of scraped products
  (``asin``, ``name``, ``full_description``, ``small_description``, ``pricing`` like
  ``"$12.99"`` or ``"$10.99 - $15.99"``, ``customization_options``, ``images``, ``query``,
  ``category``, ``product_category``);
* ``items_ins_v2_1000.json`` / ``items_ins_v2.json`` — per asin, the product's ``attributes``
  and a synthetic ``instruction`` with its ``instruction_attributes``;
* ``items_human_ins.json`` — per asin, a list of human-written instructions with their
  ``instruction_attributes`` and ``instruction_options``.

Prices and the goals' price caps are drawn as WebShop draws them (a product with a price range
gets a uniform price inside it; a goal's cap is the larger of two of the next four multiples of
10 above the price), from one generator seeded with the goal set's seed, so every worker sees
the same catalog; the goals are then shuffled once with a fresh generator of the same seed.
Named splits (:data:`GOAL_SPLITS`) pick the goal set, the seed and the part of the shuffled list:
``test`` / ``train`` are WebShop's (human goals, seed 233, goals 0–499 / 500+);
``verl-agent-test`` / ``verl-agent-train`` are verl-agent's setting (synthetic goals, the seed
of its first validation worker, 1000, goals 0–499 / 500+).
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import math
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "CatalogError",
    "Product",
    "Goal",
    "Catalog",
    "build_catalog",
    "GoalSplit",
    "GOAL_SPLITS",
    "SPLITS",
    "TEST_GOALS",
    "goal_split",
]

PRICE_GRID = [10.0 * i for i in range(1, 100)]
SHUFFLE_SEED = 233
"""WebShop's goal shuffle seed (``random.seed(233)`` before ``random.shuffle(goals)``)."""
VERL_AGENT_SEED = 1000
"""verl-agent seeds each env worker's ``random`` with its worker seed before loading (prices, caps) and
again before the shuffle; its validation workers get ``env.seed + 1000 + i`` (``env.seed`` = 0)."""
TEST_GOALS = 500


@dataclass(frozen=True)
class GoalSplit:
    """A named split: which goals, shuffled with which seed, and which part of the shuffled list."""

    name: str
    goals: str
    """``human`` (``items_human_ins.json``) or ``synthetic`` (one goal per option combination)."""
    seed: int
    """Seeds the prices and caps, then (afresh) the shuffle."""
    part: str
    """``test``: the first :data:`TEST_GOALS` shuffled goals; ``train``: the rest."""
    origin: str


GOAL_SPLITS: dict[str, GoalSplit] = {
    s.name: s
    for s in (
        GoalSplit("test", "human", SHUFFLE_SEED, "test", "WebShop's human-goal test split (goals 0-499)"),
        GoalSplit("train", "human", SHUFFLE_SEED, "train", "WebShop's human-goal train goals (500+)"),
        GoalSplit(
            "verl-agent-test",
            "synthetic",
            VERL_AGENT_SEED,
            "test",
            "verl-agent's setting: synthetic goals, goals 0-499 of its first validation worker (seed 1000)",
        ),
        GoalSplit(
            "verl-agent-train",
            "synthetic",
            VERL_AGENT_SEED,
            "train",
            "verl-agent's setting: synthetic goals 500+ of the same list (disjoint from verl-agent-test)",
        ),
    )
}
SPLITS = tuple(GOAL_SPLITS)


def goal_split(name: str) -> GoalSplit:
    """The :class:`GoalSplit` called ``name`` (a ValueError listing the choices otherwise)."""
    if name not in GOAL_SPLITS:
        raise ValueError(f"unknown split {name!r}; valid choices: {list(SPLITS)}")
    return GOAL_SPLITS[name]


class CatalogError(ValueError):
    """A malformed catalog file: names the file, the record and the field."""

    def __init__(self, file: str, record: str, field_name: str, problem: str):
        super().__init__(f"{file}: record {record}: field {field_name!r}: {problem}")
        self.file, self.record, self.field = file, record, field_name


@dataclass(frozen=True)
class Product:
    """One product, as the shop shows and the reward reads it."""

    asin: str
    title: str
    category: str
    query: str
    """WebShop's search query the product was scraped for (lower-case); part of the type reward."""
    product_category: str
    """Breadcrumb path, ``"A › B › C"``."""
    pricing: tuple[float, ...]
    """One price, or the low and high end of a range."""
    price_tag: str
    options: dict[str, list[str]]
    """Option name → values (lower-cased, ``/`` replaced by `` | `` as WebShop does)."""
    attributes: list[str]
    bullet_points: list[str]
    description: str
    rating: str = "N.A."
    reviews: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Goal:
    """A shopping task: the instruction and what the reward compares the purchase against."""

    asin: str
    category: str
    query: str
    name: str
    """Title of the target product (its nouns drive the type reward)."""
    product_category: str
    instruction_text: str
    attributes: list[str]
    price_upper: float
    goal_options: list[str]
    weight: float = 1.0
    option_names: tuple[str, ...] = ()
    """The names of ``goal_options`` when the goal names them (synthetic goals: the reward then scores
    ``(name, value)`` pairs, as WebShop does); empty when the goal lists values only (human goals)."""


def _products_hash(products: Sequence[Product]) -> Any:
    """The running sha256 of the products' asins and texts (the start of :attr:`Catalog.digest`)."""
    digest = hashlib.sha256(json.dumps([p.asin for p in products]).encode())
    digest.update(json.dumps([[p.title, p.description, p.bullet_points, p.options] for p in products]).encode())
    return digest


@dataclass
class Catalog:
    """Products, their sampled prices and the shuffled goals."""

    products: Sequence[Product]
    """A list, or a read-only view of a product store (:mod:`.store`) that decodes products on access."""
    prices: Mapping[str, float]
    goals: Sequence[Goal]
    source: str
    """``generated-<n>`` or the data folder the files came from."""
    digest: str
    """sha256 of the products' texts and the goals: names the dataset in the spec hash."""
    goal_set: str = "human"
    """``human`` or ``synthetic``: which goals :attr:`goals` holds."""
    goal_seed: int = SHUFFLE_SEED
    """The seed of the prices, caps and shuffle."""
    products_digest: str = ""
    """sha256 of the products' asins and texts alone (computed when not given): keys the search index, which
    reads nothing else, so the splits of one product list (``test``, ``verl-agent-test``, a private split) share it."""
    by_asin: Mapping[str, Product] = None  # type: ignore[assignment]
    """asin → product (built from :attr:`products` when not given)."""
    asins: Sequence[str] = None  # type: ignore[assignment]
    """The products' asins in catalog order (the search index's document ids; built when not given)."""

    def __post_init__(self) -> None:
        if self.by_asin is None:
            self.by_asin = {p.asin: p for p in self.products}
        if self.asins is None:
            self.asins = [p.asin for p in self.products]
        if not self.products_digest:
            self.products_digest = _products_hash(self.products).hexdigest()[:20]

    def goal_indices(self, split: str, test_goals: int = TEST_GOALS) -> range:
        """Goal indices of a named split; the catalog must hold that split's goal set and seed."""
        spec = goal_split(split)
        if (spec.goals, spec.seed) != (self.goal_set, self.goal_seed):
            raise ValueError(
                f"split {split!r} needs the {spec.goals} goals with seed {spec.seed}; this catalog holds "
                f"{self.goal_set} goals with seed {self.goal_seed} (load_split_catalog({split!r}, ...))"
            )
        return self.part(spec.part, test_goals)

    def part(self, part: str, test_goals: int = TEST_GOALS) -> range:
        """``test``: the first ``test_goals`` shuffled goals (WebShop's 500); ``train``: the rest."""
        cut = min(test_goals, len(self.goals))
        if part not in ("test", "train"):
            raise ValueError(f"unknown part {part!r}; valid choices: ['test', 'train']")
        return range(cut) if part == "test" else range(cut, len(self.goals))


# ------------------------------------------------------------------ raw records → Product
def _require(raw: dict[str, Any], key: str, types: type | tuple[type, ...], file: str, record: str) -> Any:
    if not isinstance(raw, dict):
        raise CatalogError(file, record, "<record>", f"expected an object, got {type(raw).__name__}")
    if key not in raw:
        raise CatalogError(file, record, key, "missing")
    value = raw[key]
    if not isinstance(value, types):
        raise CatalogError(file, record, key, f"expected {types}, got {type(value).__name__}")
    return value


def parse_pricing(text: str | None, file: str = "?", record: str = "?") -> tuple[tuple[float, ...], str]:
    """``"$10.99 - $15.99"`` → ((10.99, 15.99), ``"$10.99 to $15.99"``); empty → $100 (WebShop's default)."""
    if not text:
        return (100.0,), "$100.0"
    try:
        values = [float(re.sub(r"[^\d.]", "", part)) for part in text.split("$")[1:]]
    except ValueError:
        raise CatalogError(file, record, "pricing", f"unreadable price {text!r}") from None
    if not values:
        raise CatalogError(file, record, "pricing", f"no '$' amount in {text!r}")
    if len(values) == 1:
        return (values[0],), f"${values[0]}"
    return (values[0], values[1]), f"${values[0]} to ${values[1]}"


def _options(raw: Any, file: str, record: str) -> dict[str, list[str]]:
    if not raw:
        return {}
    if not isinstance(raw, dict):
        raise CatalogError(file, record, "customization_options", "expected an object of option lists")
    options: dict[str, list[str]] = {}
    for name, contents in raw.items():
        if contents is None:
            continue
        if not isinstance(contents, list) or not all(
            isinstance(c, dict) and isinstance(c.get("value"), str) for c in contents
        ):
            raise CatalogError(file, record, f"customization_options.{name}", "expected a list of {'value': str}")
        options[name.lower()] = [c["value"].strip().replace("/", " | ").lower() for c in contents]
    return options


def product_from_raw(raw: dict[str, Any], attributes: list[str], file: str, index: int) -> Product:
    """Adapt one record of ``items_shuffle*.json`` (WebShop's ``load_products``)."""
    record = f"#{index}"
    asin = _require(raw, "asin", str, file, record)
    record = f"#{index} (asin {asin})"
    bullets = _require(raw, "small_description", (list, str, type(None)), file, record) or []
    pricing, tag = parse_pricing(raw.get("pricing"), file, record)
    return Product(
        asin=asin,
        title=_require(raw, "name", str, file, record),
        category=_require(raw, "category", str, file, record),
        query=_require(raw, "query", str, file, record).lower().strip(),
        product_category=_require(raw, "product_category", str, file, record),
        pricing=pricing,
        price_tag=tag,
        options=_options(raw.get("customization_options"), file, record),
        attributes=list(attributes) or ["DUMMY_ATTR"],
        bullet_points=[str(b) for b in bullets] if isinstance(bullets, list) else [bullets],
        description=_require(raw, "full_description", (str, type(None)), file, record) or "",
    )


# ------------------------------------------------------------------ goals
UNCAPPED = 1_000_000.0
"""The cap of a goal whose price has fewer than two grid steps above it (its instruction names no price)."""


def price_clause(upper: float) -> str:
    """The instruction's price clause for a goal's cap (none when uncapped)."""
    return "" if upper == UNCAPPED else f", and price lower than {upper:.2f} dollars"


def _price_cap(price: float, rng: random.Random) -> tuple[float, str]:
    first = bisect.bisect_right(PRICE_GRID, price)
    above = PRICE_GRID[first : first + 4]
    if len(above) < 2:
        return UNCAPPED, ""
    upper = sorted(rng.sample(above, 2))[1]
    return upper, price_clause(upper)


def _goal_options(raw: Any) -> list[str]:
    """Human goals list option values; some copies store them as ``{name: value}``."""
    values = raw.values() if isinstance(raw, dict) else raw or []
    return [str(v) for v in values]


def goals_from_human(
    products: Iterable[Product],
    prices: Mapping[str, float],
    human: dict[str, Any],
    rng: random.Random,
    file: str = "items_human_ins.json",
) -> list[Goal]:
    """One goal per human instruction that names at least one attribute (WebShop's ``get_human_goals``)."""
    goals = []
    for p in products:
        for k, ins in enumerate(human.get(p.asin, [])):
            record = f"{p.asin}[{k}]"
            attrs = _require(ins, "instruction_attributes", list, file, record)
            if not attrs:
                continue
            upper, price_text = _price_cap(prices[p.asin], rng)
            text = _require(ins, "instruction", str, file, record)
            goals.append(
                Goal(
                    asin=p.asin,
                    category=p.category,
                    query=p.query,
                    name=p.title,
                    product_category=p.product_category,
                    instruction_text=text.strip(".") + price_text,
                    attributes=list(attrs),
                    price_upper=upper,
                    goal_options=_goal_options(ins.get("instruction_options")),
                )
            )
    return goals


def synthetic_goal(
    p: Product,
    instruction: str,
    attrs: list[str],
    names: list[str],
    combo: tuple[str, ...],
    upper: float,
    weight: float,
) -> Goal:
    """The synthetic goal of one option combination (``combo``, values of the sorted option ``names``) of ``p``."""
    option_text = ", and ".join(f"{n}: {v}" for n, v in zip(names, combo))
    return Goal(
        asin=p.asin,
        category=p.category,
        query=p.query,
        name=p.title,
        product_category=p.product_category,
        instruction_text=instruction + (f" with {option_text}" if option_text else "") + price_clause(upper),
        attributes=list(attrs),
        price_upper=upper,
        goal_options=list(combo),
        option_names=tuple(names),
        weight=weight,
    )


def goals_from_synthetic(
    products: Iterable[Product],
    prices: Mapping[str, float],
    ins: dict[str, Any],
    rng: random.Random,
    file: str = "items_ins_v2.json",
) -> list[Goal]:
    """One goal per option combination of each instructed product (WebShop's ``get_synthetic_goals``).

    Each goal's ``weight`` is WebShop's: every instruction attribute counted once per goal (option combination),
    the mean of ``1 / count`` over the goal's attributes."""
    instructed: list[tuple[Product, str, list[str], float]] = []
    counts: dict[str, int] = {}
    for p in products:
        entry = ins.get(p.asin) or {}
        if entry.get("instruction") is None:  # WebShop skips only None; an empty "" still makes goals
            continue
        attrs = _require(entry, "instruction_attributes", list, file, p.asin)
        instructed.append((p, entry["instruction"], attrs, _price_cap(prices[p.asin], rng)[0]))
        for a in attrs:
            counts[a] = counts.get(a, 0) + math.prod(len(v) for v in p.options.values())
    goals: list[Goal] = []
    for p, instruction, attrs, upper in instructed:
        names = sorted(p.options)
        combos = list(itertools.product(*(p.options[n] for n in names)))
        weight = sum(1.0 / counts[a] for a in attrs) / max(len(attrs), 1) if combos else 0.0
        goals += [synthetic_goal(p, instruction, attrs, names, combo, upper, weight) for combo in combos]
    return goals


def sample_prices(products: Iterable[Product], rng: random.Random) -> dict[str, float]:
    """WebShop's ``generate_product_prices``: a range gets a uniform draw inside it."""
    return {p.asin: (p.pricing[0] if len(p.pricing) == 1 else rng.uniform(*p.pricing[:2])) for p in products}


def build_catalog(
    raw_products: list[Any],
    ins: dict[str, Any],
    human: dict[str, Any] | None,
    *,
    source: str,
    human_goals: bool = True,
    num_products: int | None = None,
    goal_seed: int = SHUFFLE_SEED,
    files: tuple[str, str, str] = ("items_shuffle.json", "items_ins_v2.json", "items_human_ins.json"),
) -> Catalog:
    """Adapt WebShop's three raw structures into a :class:`Catalog` (deduplicated, seeded, shuffled).

    ``goal_seed`` seeds one generator for the prices and caps and, afresh, the shuffle (as verl-agent
    seeds ``random`` before loading and again before shuffling).
    """
    if not isinstance(raw_products, list):
        raise CatalogError(files[0], "<top>", "<root>", "expected a list of products")
    if not isinstance(ins, dict):
        raise CatalogError(files[1], "<top>", "<root>", "expected an object keyed by asin")
    if human_goals and not isinstance(human, dict):
        raise CatalogError(files[2], "<top>", "<root>", "expected an object keyed by asin")
    products, seen = [], set()
    for i, raw in enumerate(raw_products[:num_products] if num_products else raw_products):
        asin = raw.get("asin") if isinstance(raw, dict) else None
        if asin in seen or asin == "nan" or (isinstance(asin, str) and len(asin) > 10):
            continue
        attrs = (ins.get(asin) or {}).get("attributes", []) if isinstance(asin, str) else []
        products.append(product_from_raw(raw, attrs, files[0], i))
        seen.add(asin)
    rng = random.Random(goal_seed)
    prices = sample_prices(products, rng)
    if human_goals:
        goals = goals_from_human(products, prices, human or {}, rng, files[2])
    else:
        goals = goals_from_synthetic(products, prices, ins, rng, files[1])
    random.Random(goal_seed).shuffle(goals)
    products_hash = _products_hash(products)
    digest = products_hash.copy()
    digest.update(json.dumps([[g.asin, g.instruction_text, g.attributes, g.goal_options] for g in goals]).encode())
    return Catalog(
        products=products,
        prices=prices,
        goals=goals,
        source=source,
        digest=digest.hexdigest()[:20],
        goal_set="human" if human_goals else "synthetic",
        goal_seed=goal_seed,
        products_digest=products_hash.hexdigest()[:20],
    )


def read_json(path: Path) -> Any:
    """Load a JSON file, naming it in the error when it is not JSON."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise CatalogError(path.name, "<file>", "<json>", f"not valid JSON ({exc})") from None
