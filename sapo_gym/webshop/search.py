"""Keyword search over the catalog: BM25 (``bm25s``, pure Python/numpy) instead of pyserini/Lucene.

Each product is indexed by its title, description, bullet points and option values, as
lower-case words minus English stopwords, Snowball-stemmed (PyStemmer; pyserini's Lucene analyzer
also stems, so ``running shoe`` finds ``Running Shoes``). The index
is built once per catalog and cached on disk under ``$SAPO_GYM_CACHE`` (default
``~/.cache/sapo_gym``), keyed by the catalog's digest; it is written to a temporary folder and
renamed into place, so parallel workers never read a half-written index. A search returns the
top 50 products with a positive score, best first (ties by catalog order), as WebShop's
``SEARCH_RETURN_N``.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np

from sapo_gym.webshop.catalog import Catalog, Product

__all__ = ["SEARCH_RETURN_N", "tokenize", "product_text", "SearchIndex", "cache_root", "shared_index"]

SEARCH_RETURN_N = 50
TOKENIZER = "words-stop-snowball-v1"
"""Names the tokenizer in the index cache key: change it when :func:`tokenize` changes."""
_TOKEN = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these they "
    "this to was will with i me my we you your".split()
)


_LOCAL = threading.local()


def _stemmer() -> Any:
    """A Snowball English stemmer per thread (PyStemmer objects are not thread-safe)."""
    if not hasattr(_LOCAL, "stemmer"):
        import Stemmer

        _LOCAL.stemmer = Stemmer.Stemmer("english")
    return _LOCAL.stemmer


def tokenize(text: str) -> list[str]:
    """Lower-case alphanumeric words minus English stopwords, stemmed (the same for documents and queries)."""
    return _stemmer().stemWords([t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS])


def product_text(p: Product) -> str:
    """What a product is found by: title, description, bullet points and option values."""
    options = " ".join(v for values in p.options.values() for v in values)
    return " ".join([p.title, p.description, " ".join(p.bullet_points), options])


def cache_root() -> Path:
    return Path(os.environ.get("SAPO_GYM_CACHE") or Path.home() / ".cache" / "sapo_gym")


class SearchIndex:
    """BM25 over a catalog's products; :meth:`search` returns asins."""

    def __init__(self, catalog: Catalog, cache_dir: Path | None = None):
        import bm25s

        self.asins = [p.asin for p in catalog.products]
        folder = (cache_dir or cache_root()) / "webshop" / f"bm25-{TOKENIZER}-{catalog.digest}"
        if (folder / "params.index.json").exists():
            self.bm25 = bm25s.BM25.load(str(folder), load_vocab=True, show_progress=False)
            self.cached = True
        else:
            self.bm25 = bm25s.BM25()
            self.bm25.index([tokenize(product_text(p)) for p in catalog.products], show_progress=False)
            self._save(folder)
            self.cached = False
        self.vocab: dict[str, int] = self.bm25.vocab_dict

    def _save(self, folder: Path) -> None:
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
            self.bm25.save(str(tmp), show_progress=False)
            try:
                os.replace(tmp, folder)
            except OSError:  # another worker won the race: theirs is identical
                shutil.rmtree(tmp, ignore_errors=True)
        except OSError:  # read-only home: the in-memory index still works
            pass

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[str]:
        """The asins of the top ``k`` products with a positive BM25 score for ``query``."""
        tokens = [t for t in tokenize(query) if t in self.vocab]
        if not tokens:
            return []
        scores = np.asarray(self.bm25.get_scores(tokens))
        hits = np.flatnonzero(scores > 0)
        if len(hits) > k:  # keep everything tied with the k-th score, so ties resolve by catalog order
            kth = -np.partition(-scores[hits], k - 1)[k - 1]
            hits = hits[scores[hits] >= kth]
        order = hits[np.lexsort((hits, -scores[hits]))][:k]
        return [self.asins[i] for i in order]


_SHARED: dict[str, SearchIndex] = {}


def shared_index(catalog: Catalog) -> SearchIndex:
    """One index per catalog per process (the envs of a process share it)."""
    if catalog.digest not in _SHARED:
        _SHARED[catalog.digest] = SearchIndex(catalog)
    return _SHARED[catalog.digest]
