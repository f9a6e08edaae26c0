"""The numpy BM25 index against bm25s (the dev extra's, the library it replaced): equal float32 scores, equal hits."""

from __future__ import annotations

import random
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest

from sapo_gym.webshop.catalog import Catalog
from sapo_gym.webshop.dataset import load_catalog
from sapo_gym.webshop.search import (
    BM25_B,
    BM25_K1,
    BM25S_VERSION,
    SEARCH_RETURN_N,
    BM25Index,
    SearchIndex,
    product_text,
    tokenize,
)

bm25s = pytest.importorskip("bm25s")


def _reference(catalog: Catalog):  # type: ignore[no-untyped-def]
    ref = bm25s.BM25(k1=BM25_K1, b=BM25_B, method="lucene")
    ref.index([tokenize(product_text(p)) for p in catalog.products], show_progress=False)
    return ref


def _reference_search(ref, asins: list[str], query: str, k: int = SEARCH_RETURN_N) -> list[str]:  # type: ignore[no-untyped-def]
    """The search of before (bm25s scores, the same top-k and tie rule)."""
    tokens = [t for t in tokenize(query) if t and t in ref.vocab_dict]
    if not tokens:
        return []
    scores = np.asarray(ref.get_scores(tokens))
    hits = np.flatnonzero(scores > 0)
    if len(hits) > k:
        kth = -np.partition(-scores[hits], k - 1)[k - 1]
        hits = hits[scores[hits] >= kth]
    return [asins[i] for i in hits[np.lexsort((hits, -scores[hits]))][:k]]


def _queries(catalog: Catalog, vocab: list[str], seed: int) -> list[list[str]]:
    """Every goal instruction's tokens, random token subsets, repeated tokens, and unknown tokens mixed in."""
    rng = random.Random(seed)
    queries = [tokenize(g.instruction_text) for g in catalog.goals]
    queries += [rng.sample(vocab, rng.randint(1, 10)) for _ in range(400)]
    queries += [[w] * rng.randint(2, 5) + rng.sample(vocab, 2) for w in rng.sample(vocab, 200)]
    queries += [q + ["zzzqqq", "unknownword"] for q in queries[:150]]
    return queries


def test_the_pinned_bm25s_is_the_one_the_spec_names() -> None:
    assert version("bm25s") == BM25S_VERSION  # the dev extra pins it: the spec's backend.bm25s names these scores


@pytest.mark.parametrize("num_products", [1000, pytest.param(4000, marks=pytest.mark.slow)])
def test_scores_equal_bm25s_lucene_bit_for_bit(num_products: int) -> None:
    catalog = load_catalog(num_products=num_products)
    ours, ref = BM25Index.build([tokenize(product_text(p)) for p in catalog.products]), _reference(catalog)
    queries = _queries(catalog, sorted(ours.vocab), seed=num_products)
    compared = 0
    for query in queries:
        known = [t for t in query if t in ours.vocab]
        assert known == [t for t in query if t in ref.vocab_dict]  # the same vocabulary (bm25s adds "" only)
        if not known:
            continue
        a, b = ours.scores(known), ref.get_scores(known)
        assert a.dtype == b.dtype == np.float32 and np.array_equal(a, b), query
        compared += 1
    assert compared > len(catalog.goals)


def test_search_returns_the_asins_bm25s_ranked(tmp_path: Path) -> None:
    catalog = load_catalog()
    index, ref, asins = (
        SearchIndex(catalog, cache_dir=tmp_path),
        _reference(catalog),
        [p.asin for p in catalog.products],
    )
    rng = random.Random(1)
    words = sorted({w for g in catalog.goals for w in g.instruction_text.split()})
    queries = [g.instruction_text for g in catalog.goals] + [g.query for g in catalog.goals]
    queries += [" ".join(rng.sample(words, rng.randint(1, 6))) for _ in range(300)] + ["", "the of and", "zzzz qqqq"]
    for query in queries:
        assert index.search(query) == _reference_search(ref, asins, query), query
        assert index.search(query, k=3) == _reference_search(ref, asins, query, k=3), query


def test_a_cached_index_scores_as_a_fresh_one(tmp_path: Path) -> None:
    catalog = load_catalog(num_products=200)
    fresh, cached = SearchIndex(catalog, cache_dir=tmp_path), SearchIndex(catalog, cache_dir=tmp_path)
    assert (fresh.cached, cached.cached) == (False, True)
    assert list(fresh.vocab) == list(cached.vocab)
    for name in ("data", "docs", "indptr"):
        assert np.array_equal(np.load(fresh.bm25.folder / f"{name}.npy"), np.load(cached.bm25.folder / f"{name}.npy"))
    query = tokenize(catalog.goals[0].instruction_text)
    assert np.array_equal(fresh.bm25.scores(query), cached.bm25.scores(query))
