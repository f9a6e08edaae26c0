"""A catalog's title nouns tagged once with spaCy and cached as a table of files every process reads.

WebShop's full set has 1.18 M titles: tagged one at a time (1.6 ms each) that is half an hour, and held as a
dict it is hundreds of megabytes in every process. :func:`build_mapped_table` tags them in batches
(:func:`.nouns.spacy_nouns_batch`: the nouns of one title at a time, in about a third of the time) spread over
worker processes (:func:`tag_workers`), and writes them as it goes into a folder: ``entries.bin`` (each title with its nouns,
as JSON) with ``entry_offsets.npy``, and ``hashes.npy`` / ``entry_ids.npy`` (an 8-byte blake2b of each title,
sorted) for a lookup by binary search. :class:`MappedNounTable` reads it (the last 65,536 titles read are kept
per process).
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import multiprocessing
import os
from array import array
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from sapo_gym.webshop.bm25 import term_hash
from sapo_gym.webshop.mapped import PROGRESS_EVERY, ArrayFile, FileBytes, SortedFile
from sapo_gym.webshop.nouns import spacy_nouns_batch

__all__ = ["MappedNounTable", "build_mapped_table", "tag_workers", "TAG_CHUNK"]

TAG_CHUNK = 10_000
"""Titles per batch handed to a tagging worker."""
MAX_TAG_WORKERS = 4
"""At most this many spaCy processes (each holds its own model, a few hundred megabytes)."""

log = logging.getLogger(__name__)


def tag_workers(n_titles: int) -> int:
    """Processes to tag ``n_titles`` with: one for a few batches, else the usable cores (at most 4)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return 1 if n_titles <= 2 * TAG_CHUNK else max(1, min(cores, MAX_TAG_WORKERS))


def _tagged(titles: list[str], package: str, workers: int) -> Iterator[list[tuple[str, ...]]]:
    chunks = [titles[i : i + TAG_CHUNK] for i in range(0, len(titles), TAG_CHUNK)]
    if workers <= 1:
        yield from (spacy_nouns_batch(chunk, package) for chunk in chunks)
        return
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield from pool.map(spacy_nouns_batch, chunks, itertools.repeat(package))


def build_mapped_table(
    folder: Path, titles: list[str], rule_id: str, package: str, source: str, workers: int | None = None
) -> None:
    """Tag ``titles`` (unique) with spaCy ``package`` and write the table into the new folder ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    offsets = array("q", [0])
    with open(folder / "entries.bin", "wb") as fh:
        tagged = _tagged(titles, package, tag_workers(len(titles)) if workers is None else workers)
        for n, (title, nouns) in enumerate(zip(titles, itertools.chain.from_iterable(tagged), strict=True), 1):
            offsets.append(offsets[-1] + fh.write(json.dumps([title, list(nouns)], ensure_ascii=False).encode()))
            if n % PROGRESS_EVERY == 0:
                log.info("noun table: %d of %d titles tagged", n, len(titles))
    hashes = np.fromiter((term_hash(t) for t in titles), dtype=np.uint64, count=len(titles))
    order = np.argsort(hashes, kind="stable")
    np.save(folder / "entry_offsets.npy", np.array(offsets, dtype=np.int64))
    np.save(folder / "hashes.npy", hashes[order])
    np.save(folder / "entry_ids.npy", order.astype(np.int64))
    (folder / "meta.json").write_text(json.dumps({"rule": rule_id, "titles": len(titles), "source": source}))


class MappedNounTable:
    """A cached table (see the module docstring); calling it with a title outside it raises a KeyError naming it."""

    def __init__(self, folder: Path):
        meta = json.loads((folder / "meta.json").read_text())
        self.rule_id: str = meta["rule"]
        self.offsets, self.hashes = ArrayFile(folder / "entry_offsets.npy"), SortedFile(folder / "hashes.npy")
        self.ids, self.entries = ArrayFile(folder / "entry_ids.npy"), FileBytes(folder / "entries.bin")
        self._find = functools.lru_cache(maxsize=1 << 16)(self._lookup)

    def __len__(self) -> int:
        return len(self.ids)

    def _lookup(self, title: str) -> tuple[str, ...] | None:
        key = np.uint64(term_hash(title))
        j = self.hashes.searchsorted(key)
        while j < len(self.hashes) and self.hashes.item(j) == key:
            i = int(self.ids.item(j))
            stored, nouns = json.loads(self.entries.read(*self.offsets.span(i)))
            if stored == title:
                return tuple(nouns)
            j += 1
        return None

    def __call__(self, title: str) -> tuple[str, ...]:
        nouns = self._find(title)
        if nouns is None:
            raise KeyError(f"title {title!r} is not in the noun table of this catalog")
        return nouns

    def covers(self, titles: Iterable[str]) -> bool:
        return all(self._lookup(t) is not None for t in titles)
