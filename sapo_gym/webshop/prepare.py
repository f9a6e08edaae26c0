"""``sapo-gym data webshop --prepare``: build every disk cache an env of a catalog reads, before any env runs.

An env builds what it misses under ``$SAPO_GYM_CACHE/webshop`` the first time it meets a catalog: for the full
set, the product store (:mod:`.store`), each synthetic split's goal arrays (:mod:`.store_goals`), the BM25 index
(:mod:`.search`) and spaCy's noun table (:mod:`.noun_table`), minutes each at 1.18 M products. :func:`prepare_caches`
builds them ahead, once per machine and catalog, through the very calls an env makes (:func:`.dataset.load_split_catalog`,
:func:`.search.shared_index`, :func:`.noun_table.catalog_noun_rule` with the default noun choice), so what it
writes is what an env then finds, and no env pays for them at run time. Each step is timed and names the cache
entries it wrote (none: they were there already).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sapo_gym.webshop.catalog import GOAL_SPLITS, SPLITS, Catalog
from sapo_gym.webshop.dataset import find_files, load_split_catalog
from sapo_gym.webshop.noun_table import catalog_noun_rule
from sapo_gym.webshop.search import cache_root, shared_index

__all__ = ["Step", "cache_entries", "prepare_caches", "prepared_splits"]


@dataclass(frozen=True)
class Step:
    """One preparation step: what it made ready, how long it took, and the cache entries it wrote."""

    label: str
    seconds: float
    built: tuple[str, ...]


def cache_entries(root: Path) -> set[str]:
    """The entries of ``root/webshop``: its folders and files (stores, indexes, noun tables, file digests) and the
    goal folders inside each store; temporary folders of builds under way are left out."""
    folder = root / "webshop"
    if not folder.is_dir():
        return set()
    top = {p.name for p in folder.iterdir() if not p.name.startswith(".")}
    digests = {f"file-digests/{p.name}" for p in (folder / "file-digests").glob("[!.]*")}
    goals = {f"{p.parent.name}/{p.name}" for p in folder.glob("*/goals-seed*")}
    return top | digests | goals


def _timed(label: str, action: Callable[[], Any], report: Callable[[str], None]) -> tuple[Step, Any]:
    root = cache_root()
    before = cache_entries(root)
    report(f"{label} ...")
    start = time.perf_counter()
    value = action()
    step = Step(label, time.perf_counter() - start, tuple(sorted(cache_entries(root) - before)))
    what = f"built {_described(step.built)}" if step.built else "nothing to build (cached)"
    report(f"{label}: {what} in {step.seconds:.1f} s")
    return step, value


def _described(built: tuple[str, ...]) -> str:
    """The entries a step built, its files' digests (one small file each) counted rather than named."""
    digests = sum(1 for entry in built if entry.startswith("file-digests/"))
    named = [entry for entry in built if entry != "file-digests" and not entry.startswith("file-digests/")]
    return ", ".join(named + ([f"{digests} file digests"] if digests else []))


def prepared_splits(has_human: bool) -> list[str]:
    """The named splits an env can be built with: the human-goal ones need ``items_human_ins.json``."""
    return [s for s in SPLITS if has_human or GOAL_SPLITS[s].goals != "human"]


def prepare_caches(data_dir: Path, catalog: str, report: Callable[[str], None] = print) -> list[Step]:
    """Build the caches an env of ``catalog`` over ``data_dir`` reads, for every split it can be built with (default
    ``num_products``, the default noun rule): each split's catalog (the store, the goals), the search index of
    each product list, the noun table of each split's titles. Returns the steps, in order."""
    splits = prepared_splits(find_files(data_dir, catalog).human is not None)
    steps: list[Step] = []
    catalogs: dict[str, Catalog] = {}
    for split in splits:
        step, catalogs[split] = _timed(
            f"catalog {catalog}, split {split} (products, prices, goals)",
            lambda s=split: load_split_catalog(s, data_dir, catalog=catalog),
            report,
        )
        steps.append(step)
    indexed: set[str] = set()
    for cat in catalogs.values():
        if cat.products_digest not in indexed:  # the splits of one product list share its index
            indexed.add(cat.products_digest)
            steps.append(
                _timed(f"BM25 index of {len(cat.products)} products", lambda c=cat: shared_index(c), report)[0]
            )
    rules: set[str] = set()
    for split, cat in catalogs.items():
        step, rule = _timed(f"noun table, split {split}", lambda c=cat: catalog_noun_rule(c), report)
        rules.add(rule.id)
        steps.append(step)
    report(f"noun rule: {', '.join(sorted(rules))}")
    return steps
