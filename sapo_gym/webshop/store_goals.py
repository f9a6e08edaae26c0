"""The catalog over a product store (:mod:`.store`): prices, human goals, and synthetic goals made on access.

Everything is drawn as :func:`~.catalog.build_catalog` draws it from the same files, so the pages and rewards
are the same: one generator seeded with the split's seed samples the prices of the products with a price range
(in catalog order), then the goals' caps (human goals: per instruction with attributes, in catalog order;
synthetic goals: per instructed product), and a fresh generator of that seed shuffles the goals.

Human goals (about 12 k on WebShop's files) are made at once. Synthetic goals (one per option combination of
each instructed product: millions on the full set) are not: the caps, where each product's goals start and the
shuffled order are arrays (computed once per seed and cached beside the store), and ``goals[k]`` reads the items
it needs of them (:mod:`.mapped`) and builds the goal.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sapo_gym.webshop.catalog import Catalog, Goal, _price_cap, goals_from_human, synthetic_goal
from sapo_gym.webshop.mapped import ArrayFile, SortedFile
from sapo_gym.webshop.store import ProductStore, StoreAsins, StoreByAsin, StoreProducts

__all__ = ["store_catalog", "StorePrices", "SyntheticGoals", "sample_store_prices"]


def sample_store_prices(store: ProductStore, rng: random.Random) -> np.ndarray:
    """WebShop's ``generate_product_prices`` over the store: a range gets ``rng.uniform`` inside it, in order."""
    prices = store.array("price_low").astype(np.float64, copy=False)
    ranged = store.array("ranged")
    prices[ranged] = [rng.uniform(a, b) for a, b in zip(prices[ranged].tolist(), store.array("ranged_high").tolist())]
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
        folder = _seeded_folder(store, prices, rng, seed)
        self.products, self.uppers, self.order = (
            ArrayFile(folder / f"{n}.npy") for n in ("products", "uppers", "order")
        )
        self.starts = SortedFile(folder / "starts.npy")

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(len(self)))]
        if not -len(self) <= k < len(self):
            raise IndexError(k)
        g = int(self.order.item(k))
        j = self.starts.searchsorted(g, side="right") - 1
        i = int(self.products.item(j))
        p = self.store.product(i)
        instruction, attrs = self.store.instruction(i)
        names = sorted(p.options)
        combo = _mixed_radix(g - int(self.starts.item(j)), [p.options[n] for n in names])
        return synthetic_goal(
            p,
            instruction,
            attrs,
            names,
            combo,
            float(self.uppers.item(j)),  # type: ignore[arg-type]
            float(self.store.weights.item(i)),
        )


def _drawn(store: ProductStore, prices: np.ndarray, rng: random.Random, seed: int) -> dict[str, np.ndarray]:
    """The instructed products with goals, their caps (every instructed product draws one, as WebShop's loop does),
    where each one's goals start in the list of all goals, and the order ``seed`` shuffles that list into."""
    instructed = np.flatnonzero(store.array("instructed"))
    uppers = np.array([_price_cap(float(prices[i]), rng)[0] for i in instructed.tolist()], dtype=np.float64)
    combos = store.array("combos")[instructed]
    keep = combos > 0
    starts = np.zeros(int(keep.sum()) + 1, dtype=np.int64)
    np.cumsum(combos[keep], out=starts[1:])
    order = list(range(int(starts[-1])))
    random.Random(seed).shuffle(order)
    return {
        "products": instructed[keep].astype(np.int64),
        "uppers": uppers[keep],
        "starts": starts,
        "order": np.array(order, dtype=np.int64),
    }


def _saved(folder: Path, arrays: dict[str, np.ndarray]) -> Path:
    for name, values in arrays.items():
        np.save(folder / f"{name}.npy", values)
    return folder


def _seeded_folder(store: ProductStore, prices: np.ndarray, rng: random.Random, seed: int) -> Path:
    """The folder of ``seed``'s goal arrays (:func:`_drawn`) beside the store, drawn and saved there if missing (a
    read-only store: into a temporary folder, drawn again by the next process)."""
    folder = store.folder / f"goals-seed{seed}"
    if (folder / "order.npy").is_file():
        return folder
    arrays = _drawn(store, prices, rng, seed)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=store.folder))
    except OSError:
        return _saved(Path(tempfile.mkdtemp(prefix="sapo-goals-")), arrays)
    try:
        os.replace(_saved(tmp, arrays), folder)
    except OSError:  # another worker's identical arrays landed first
        pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def store_catalog(
    store: ProductStore,
    human: dict[str, Any] | None,
    *,
    human_goals: bool,
    goal_seed: int,
    source: str,
    data_digest: str,
    human_file: str,
) -> Catalog:
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
    return Catalog(
        products=StoreProducts(store),
        prices=price_map,
        goals=goals,
        source=source,
        digest=digest,
        goal_set=goal_set,
        goal_seed=goal_seed,
        products_digest=store.products_digest,
        by_asin=StoreByAsin(store),
        asins=StoreAsins(store),
    )
