"""WebShop's private split: held-out goals over the generated catalog, drawn from a secret seed.

The shop (products, their prices: those of the ``test`` split's shop) is the public generated catalog;
what is new is the goals. Each is written the way the generator writes its human-style instructions
(a template naming some of a product's attributes and options) with an RNG seeded by the secret, and
is kept only if no public goal of that catalog (every human goal, of ``test`` and ``train``, and
every synthetic goal, of ``verl-agent-test`` and ``verl-agent-train``) asks for the same product with
the same attributes and options, or has the same instruction text, and no earlier private goal does
either. So a table of public goals answers none of them; the catalog itself remains public (an agent
may know the products before it plays, as it does on every split).
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
from dataclasses import replace

from sapo_gym.private import derive
from sapo_gym.webshop.catalog import SHUFFLE_SEED, Catalog, Goal, GoalSplit, _price_cap
from sapo_gym.webshop.generate import PRODUCT_TYPES, _instruction

__all__ = ["DEFAULT_PRIVATE_GOALS", "PRIVATE_GOALS", "goal_key", "private_catalog", "public_goal_keys"]

DEFAULT_PRIVATE_GOALS = 100
PRIVATE_GOALS = GoalSplit(
    "private",
    "private",
    SHUFFLE_SEED,
    "all",
    "held-out goals drawn from a secret seed over the generated catalog (prices of seed 233)",
)
"""The spec's goal fields of a private split: the set, the seed of the shop's prices (not the secret), the part."""
_MAX_DRAWS = 200


def goal_key(goal: Goal) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """What a goal asks for: the product, its attributes and its options (order ignored)."""
    return goal.asin, tuple(sorted(goal.attributes)), tuple(sorted(goal.goal_options))


def _text(goal: Goal) -> str:
    return goal.instruction_text.split(", and price lower than")[0].strip(" .").lower()


@functools.lru_cache(maxsize=2)
def public_goal_keys(num_products: int | None, catalog_seed: int) -> tuple[frozenset, frozenset[str]]:
    """(keys, instruction texts) of every public goal of the generated catalog (human and synthetic goal sets),
    computed once per process and catalog."""
    from sapo_gym.webshop.catalog import GOAL_SPLITS
    from sapo_gym.webshop.dataset import load_catalog

    keys: set = set()
    texts: set[str] = set()
    for spec in {(s.goals, s.seed) for s in GOAL_SPLITS.values()}:
        public = load_catalog(
            None, num_products=num_products, human_goals=spec[0] == "human", seed=catalog_seed, goal_seed=spec[1]
        )
        keys |= {goal_key(g) for g in public.goals}
        texts |= {_text(g) for g in public.goals}
    return frozenset(keys), frozenset(texts)


def _draw(rng: random.Random, shop: Catalog) -> Goal:
    types = {t.query: t for t in PRODUCT_TYPES}
    product = shop.products[rng.randrange(len(shop.products))]
    record, _ = _instruction(rng, types[product.query], list(product.attributes), product.options)
    upper, price_text = _price_cap(shop.prices[product.asin], rng)
    return Goal(
        asin=product.asin,
        category=product.category,
        query=product.query,
        name=product.title,
        product_category=product.product_category,
        instruction_text=record["instruction"].strip(".") + price_text,
        attributes=list(record["instruction_attributes"]),
        price_upper=upper,
        goal_options=list(record["instruction_options"]),
    )


@functools.lru_cache(maxsize=4)
def private_catalog(
    seed: str, n_goals: int = DEFAULT_PRIVATE_GOALS, num_products: int | None = None, catalog_seed: int = 0
) -> Catalog:
    """The generated shop with ``n_goals`` held-out goals drawn from ``seed`` (see the module docstring)."""
    from sapo_gym.webshop.dataset import load_catalog

    if n_goals < 1:
        raise ValueError("private_goals must be >= 1")
    rng = random.Random(derive(seed, f"webshop:{num_products}:{catalog_seed}"))  # derive checks the seed
    shop = load_catalog(None, num_products=num_products, human_goals=True, seed=catalog_seed, goal_seed=SHUFFLE_SEED)
    public_keys, public_texts = public_goal_keys(num_products, catalog_seed)
    taken, texts = set(public_keys), set(public_texts)
    goals: list[Goal] = []
    for _ in range(n_goals):
        for _ in range(_MAX_DRAWS):
            goal = _draw(rng, shop)
            if goal_key(goal) not in taken and _text(goal) not in texts:
                break
        else:
            raise RuntimeError(f"no held-out goal after {_MAX_DRAWS} draws ({len(goals)} of {n_goals} drawn)")
        taken.add(goal_key(goal))
        texts.add(_text(goal))
        goals.append(goal)
    digest = hashlib.sha256(shop.digest.encode())
    digest.update(
        json.dumps([[g.asin, g.instruction_text, g.attributes, g.goal_options, g.price_upper] for g in goals]).encode()
    )
    return replace(shop, goals=goals, digest=digest.hexdigest()[:20], goal_set="private")
