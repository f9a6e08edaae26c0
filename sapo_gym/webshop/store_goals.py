"""The catalog over a product store (:mod:`.store`): prices, human goals, and synthetic goals made on access.

Everything is drawn as :func:`~.catalog.build_catalog` draws it from the same files, so the pages and rewards
are the same: one generator seeded with the split's seed samples the prices of the products with a price range
(in catalog order), then the goals' caps (human goals: per instruction with attributes, in catalog order;
synthetic goals: per instructed product), and a fresh generator of that seed shuffles the goals.

Human goals (about 12 k on WebShop's files) are made at once. Synthetic goals (one per option combination of
each instructed product: millions on the full set) are not: the caps and the shuffled order are arrays (computed
once per seed and cached beside the store, mapped read-only), and ``goals[k]`` builds the goal when it is read.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from sapo_gym.webshop.catalog import Catalog, Goal, _price_cap, goals_from_human, synthetic_goal
from sapo_gym.webshop.mapped import mapped_array
from sapo_gym.webshop.store import ProductStore, StoreAsins, StoreByAsin, StoreProducts

__all__ = ["store_catalog", "StorePrices", "SyntheticGoals", "sample_store_prices"]


def sample_store_prices(store: ProductStore, rng: random.Random) -> np.ndarray:
    """WebShop's ``generate_product_prices`` over the store: a range gets ``rng.uniform`` inside it, in order."""
    prices = np.array(store.price_low, dtype=np.float64)
    ranged = store.ranged
    prices[ranged] = [rng.uniform(a, b) for a, b in zip(prices[ranged].tolist(), store.ranged_high.tolist())]
    return prices


class StorePrices(Mapping[str, float]):
    """asin → sampled price, over the store's asin index."""

    def __init__(self, store: ProductStore, prices: np.ndarray):
        self.store, self.prices = store, prices

    def __getitem__(self, asin: str) -> float:
        i = self.store.index(asin)
        if i is None:
            raise KeyError(asin)
        return float(self.prices[i])

    def __iter__(self) -> Iterator[str]:
        return iter(StoreAsins(self.store))

    def __len__(self) -> int:
        return len(self.store)


def _mixed_radix(c: int, lists: list[list[str]]) -> tuple[str, ...]:
    """The ``c``-th tuple of ``itertools.product(*lists)`` (the last list varies fastest)."""
    picked = []
    for values in reversed(lists):
        c, d = divmod(c, len(values))
        picked.append(values[d])
    return tuple(reversed(picked))


class SyntheticGoals(Sequence[Goal]):
    """The synthetic goals of a store, in their shuffled order, each made when read (see the module docstring)."""

    def __init__(self, store: ProductStore, prices: np.ndarray, rng: random.Random, seed: int):
        self.store = store
        arrays = _seeded_arrays(store, prices, rng, seed)
        self.products, self.uppers, self.order = arrays["products"], arrays["uppers"], arrays["order"]
        self.starts = np.zeros(len(self.products) + 1, dtype=np.int64)
        np.cumsum(store.combos[self.products], out=self.starts[1:])

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(len(self)))]
        if not -len(self) <= k < len(self):
            raise IndexError(k)
        g = int(self.order[k])
        j = int(np.searchsorted(self.starts, g, side="right")) - 1
        i = int(self.products[j])
        p = self.store.product(i)
        instruction, attrs = self.store.instruction(i)
        names = sorted(p.options)
        combo = _mixed_radix(g - int(self.starts[j]), [p.options[n] for n in names])
        return synthetic_goal(p, instruction, attrs, names, combo, float(self.uppers[j]), float(self.store.weights[i]))  # type: ignore[arg-type]


def _seeded_arrays(store: ProductStore, prices: np.ndarray, rng: random.Random, seed: int) -> dict[str, np.ndarray]:
    """The instructed products with goals, their caps and the shuffled goal order of ``seed``: read from the
    store's folder, else drawn (every instructed product draws a cap, as WebShop's loop does) and saved there."""
    folder = store.folder / f"synthetic-seed{seed}"
    names = ("products", "uppers", "order")
    if (folder / "order.npy").is_file():
        return {n: mapped_array(folder / f"{n}.npy") for n in names}
    instructed = np.flatnonzero(store.instructed)
    uppers = np.array([_price_cap(float(prices[i]), rng)[0] for i in instructed.tolist()], dtype=np.float64)
    keep = store.combos[instructed] > 0
    order = list(range(int(store.combos[instructed].sum())))
    random.Random(seed).shuffle(order)
    arrays = {"products": instructed[keep].astype(np.int64), "uppers": uppers[keep], "order": np.array(order, dtype=np.int64)}
    del order
    try:
        tmp = tempfile.mkdtemp(prefix=".tmp-", dir=store.folder)
    except OSError:  # a read-only store: drawn again by the next process
        return arrays
    try:
        for n in names:
            np.save(os.path.join(tmp, f"{n}.npy"), arrays[n])
        os.replace(tmp, folder)
    except OSError:  # another worker's identical arrays landed first
        pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not (folder / "order.npy").is_file():
        return arrays
    return {n: mapped_array(folder / f"{n}.npy") for n in names}


def store_catalog(store: ProductStore, human: dict[str, Any] | None, *, human_goals: bool, goal_seed: int,
                  source: str, data_digest: str, human_file: str) -> Catalog:
    """The :class:`~.catalog.Catalog` over ``store``; ``data_digest`` names the files it came from (with the goal set
    and seed it makes the dataset's digest)."""
    rng = random.Random(goal_seed)
    prices = sample_store_prices(store, rng)
    price_map = StorePrices(store, prices)
    goals: Sequence[Goal]
    if human_goals:
        assert human is not None
        wanted = sorted({i for i in (store.index(a) for a in human) if i is not None})
        goals = goals_from_human((store.product(i) for i in wanted), price_map, human, rng, human_file)
        random.Random(goal_seed).shuffle(goals)  # type: ignore[arg-type]
    else:
        goals = SyntheticGoals(store, prices, rng, goal_seed)
    goal_set = "human" if human_goals else "synthetic"
    digest = hashlib.sha256(f"{data_digest}|{goal_set}|{goal_seed}".encode()).hexdigest()[:20]
    return Catalog(products=StoreProducts(store), prices=price_map, goals=goals, source=source, digest=digest,
                   goal_set=goal_set, goal_seed=goal_seed, products_digest=store.products_digest,
                   by_asin=StoreByAsin(store), asins=StoreAsins(store))
