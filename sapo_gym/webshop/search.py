"""Keyword search over the catalog: BM25 in numpy (Lucene's variant, as ``bm25s`` computes it) instead of pyserini/Lucene.

Each product is indexed as WebShop's ``search_engine/convert_product_file_format.py`` builds its
documents: the title, the description, the *first* bullet point and the options as
``"name: value, value"`` (joined by ``", and "``), lower-cased. Words are analysed as
Anserini's default English analyzer does (Lucene's 33 English stopwords removed, Porter-stemmed;
PyStemmer's ``porter``), and ranked by BM25 with Anserini's defaults k1 = 0.9, b = 0.4 (the
``BM25Similarity(0.9f, 0.4f)`` that pyserini's ``LuceneSearcher`` starts with).

The scores are those of ``bm25s`` :data:`BM25S_VERSION` with ``method="lucene"`` (which this
index replaced, so the light install needs neither bm25s nor scipy), bit for bit: the idf
``log(1 + (N - df + 0.5) / (df + 0.5))`` in float64, stored as float32; each (document, term)
score ``float32(idf × tf / (k1 × (1 - b + b × |d| / avgdl) + tf))`` with the product and the
fraction in float64 (what bm25s's float32 counts against a float64 average give under NumPy 2);
a query's score the float32 sum of its tokens' scores in query order (repeated tokens count
again). A test compares both on many queries with ``np.array_equal``.

The index is built once per catalog and cached on disk under ``$SAPO_GYM_CACHE`` (default
``~/.cache/sapo_gym``) as a folder of arrays that every process reads (:mod:`.bm25`), keyed by what it
reads: the digest of the catalog's products (:attr:`~.catalog.Catalog.products_digest`, not the goals: the splits
of one product list share it); it is built in a temporary folder and renamed into place, so parallel workers
never read a half-written index (and a read-only cache gets an index in a temporary folder instead).
A search returns the top 50 products with a positive score, best first (ties by catalog order,
as Lucene breaks ties by document order), as WebShop's ``SEARCH_RETURN_N``.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sapo_gym.webshop.bm25 import BM25Index
from sapo_gym.webshop.catalog import Catalog, Product

__all__ = [
    "SEARCH_RETURN_N",
    "BM25_K1",
    "BM25_B",
    "BM25S_VERSION",
    "tokenize",
    "product_text",
    "BM25Index",
    "SearchIndex",
    "cache_root",
    "shared_index",
]

SEARCH_RETURN_N = 50
BM25_K1, BM25_B = 0.9, 0.4
"""Anserini's defaults (``SimpleSearcher``: ``new BM25Similarity(0.9f, 0.4f)``), which WebShop's searcher keeps."""
BM25S_VERSION = "0.3.16"
"""The bm25s release whose ``method="lucene"`` scores :class:`BM25Index` reproduces (the spec's ``backend.bm25s``)."""
TOKENIZER = f"webshop-fields-v2-lucene-stop-porter3-k{BM25_K1}-b{BM25_B}"
"""Names the indexed fields, the analyzer and BM25's parameters in the index cache key: change it when any changes."""
INDEX_FORMAT = "bm25np2"
"""Names the on-disk format in the cache key (a folder of arrays, :mod:`.bm25`; older formats are
never read as this one)."""
_POSSESSIVE = re.compile(r"['\u2019\uff07]s\b")
_TOKEN = re.compile(r"[0-9]+(?:[.,][0-9]+)+|[^\W_]+")
_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these they "
    "this to was will with".split()
)
"""Lucene's ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET``."""


_LOCAL = threading.local()


def _stemmer() -> Any:
    """A Porter stemmer per thread (PyStemmer objects are not thread-safe)."""
    if not hasattr(_LOCAL, "stemmer"):
        import Stemmer

        _LOCAL.stemmer = Stemmer.Stemmer("porter")
    return _LOCAL.stemmer


def tokenize(text: str) -> list[str]:
    """Lower-case words (possessive ``'s`` dropped, decimals kept whole) minus stopwords, Porter-stemmed.

    The same for documents and queries; any Unicode letters count as word characters.
    """
    words = [w for w in _TOKEN.findall(_POSSESSIVE.sub("", text.lower())) if w not in _STOPWORDS]
    stems = iter(_stemmer().stemWords([w for w in words if len(w) > 2]))
    return [
        w if len(w) <= 2 else next(stems) for w in words
    ]  # Lucene's Porter leaves words of <= 2 letters as they are


def product_text(p: Product) -> str:
    """What a product is found by: WebShop's document (title, description, first bullet point, options), lower-cased."""
    options = ", and ".join(f"{name}: {', '.join(values)}" for name, values in p.options.items())
    first_bullet = p.bullet_points[0] if p.bullet_points else ""
    return " ".join([p.title, p.description, first_bullet, options]).lower()


def cache_root() -> Path:
    return Path(os.environ.get("SAPO_GYM_CACHE") or Path.home() / ".cache" / "sapo_gym")


class SearchIndex:
    """BM25 over a catalog's products; :meth:`search` returns asins."""

    def __init__(self, catalog: Catalog, cache_dir: Path | None = None):
        self.asins: Sequence[str] = catalog.asins
        folder = (cache_dir or cache_root()) / "webshop" / f"{INDEX_FORMAT}-{TOKENIZER}-{catalog.products_digest}"
        self.cached = (folder / "meta.json").is_file()
        if not self.cached:
            self._build(catalog, folder)
        self.bm25 = BM25Index.load(folder) if (folder / "meta.json").is_file() else self._in_temp(catalog)
        self.vocab: Mapping[str, int] = self.bm25.vocab

    @staticmethod
    def _documents(catalog: Catalog) -> Iterator[list[str]]:
        return (tokenize(product_text(p)) for p in catalog.products)

    def _build(self, catalog: Catalog, folder: Path) -> None:
        """Build into a temporary folder beside ``folder``, then rename it into place (a parallel worker's identical
        index may land first: then this one is dropped)."""
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
        except OSError:  # a read-only cache: the index is built in a temporary folder instead
            return
        try:
            BM25Index.build(self._documents(catalog), tmp)
            os.replace(tmp, folder)
        except OSError:
            pass
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _in_temp(self, catalog: Catalog) -> BM25Index:
        return BM25Index.build(self._documents(catalog))

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[str]:
        """The asins of the top ``k`` products with a positive BM25 score for ``query``."""
        ids = [i for i in (self.vocab.get(t) for t in tokenize(query)) if i is not None]
        if not ids or k < 1:
            return []
        scores = self.bm25.scores_of_ids(ids)
        hits = np.flatnonzero(scores > 0)
        if len(hits) > k:  # keep everything tied with the k-th score, so ties resolve by catalog order
            found = scores[hits]
            hits = hits[found >= np.partition(found, len(found) - k)[len(found) - k]]
        order = hits[np.lexsort((hits, -scores[hits]))][:k]
        return [self.asins[i] for i in order]


_SHARED: dict[str, SearchIndex] = {}


def shared_index(catalog: Catalog) -> SearchIndex:
    """One index per product list per process (the envs of a process share it, whatever their goals)."""
    if catalog.products_digest not in _SHARED:
        _SHARED[catalog.products_digest] = SearchIndex(catalog)
    return _SHARED[catalog.products_digest]
