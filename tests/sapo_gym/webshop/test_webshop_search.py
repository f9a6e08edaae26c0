"""BM25 search: relevance, ties, limits, the on-disk cache."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from sapo_gym.webshop import bm25
from sapo_gym.webshop.bm25 import BM25Index
from sapo_gym.webshop.catalog import Catalog, build_catalog
from sapo_gym.webshop.dataset import load_catalog, load_split_catalog
from sapo_gym.webshop.generate import generate_raw
from sapo_gym.webshop.search import (
    BM25_B,
    BM25_K1,
    INDEX_FORMAT,
    SEARCH_RETURN_N,
    TOKENIZER,
    SearchIndex,
    product_text,
    shared_index,
    tokenize,
)


def test_tokenize_drops_stopwords_and_punctuation() -> None:
    # Lucene's English analyzer: possessive 's dropped, its 33 stopwords only ("i" stays), Porter stems
    assert tokenize("The Men's T-Shirts, for RUNNING! I") == ["men", "t", "shirt", "run", "i"]
    assert tokenize("6.76 fl oz café, sulfate™free") == ["6.76", "fl", "oz", "café", "sulfat", "free"]
    assert tokenize("women s xs") == ["women", "s", "xs"]  # Lucene's Porter leaves words of <= 2 letters alone


def test_a_query_of_short_words_and_an_empty_document_search_cleanly(tmp_path: Path, make_product) -> None:
    empty = make_product(asin="B000EMPTY1", title="", description="", bullet_points=[], options={})
    shirt = make_product(title="Womens Shirt", bullet_points=[], options={}, description="")
    catalog = Catalog(products=[empty, shirt], prices={}, goals=[], source="t", digest="short-words")
    index = SearchIndex(catalog, cache_dir=tmp_path)
    assert index.search("womens s") == [shirt.asin] and index.search("s") == [] and index.search("") == []


def test_search_finds_the_products_of_a_query(tmp_path: Path) -> None:
    catalog = load_catalog()
    index = SearchIndex(catalog, cache_dir=tmp_path)
    hits = index.search("wireless earbuds")
    assert 0 < len(hits) <= SEARCH_RETURN_N
    top = [catalog.by_asin[a] for a in hits[:10]]
    assert all(p.query == "wireless earbuds" for p in top)
    assert index.search("wireless earbud")[:10] == hits[:10]  # stemmed: singular finds plural
    assert index.search("zzzz qqqq") == [] and index.search("the of and") == []


def test_ties_resolve_by_catalog_order(tmp_path: Path) -> None:
    products, ins, human = generate_raw(20, seed=5)
    for p in products:  # identical texts: every score ties
        p.update(name="Plain Mug", full_description="", small_description=[], customization_options={})
    catalog = build_catalog(products, ins, human, source="ties")
    assert SearchIndex(catalog, cache_dir=tmp_path).search("mug", k=5) == [p.asin for p in catalog.products[:5]]


def test_index_is_cached_on_disk_by_the_products_digest(tmp_path: Path) -> None:
    products, ins, human = generate_raw(40, seed=6)
    catalog = build_catalog(products, ins, human, source="c")
    first = SearchIndex(catalog, cache_dir=tmp_path)
    second = SearchIndex(catalog, cache_dir=tmp_path)
    assert (first.cached, second.cached) == (False, True)
    assert (tmp_path / "webshop" / f"{INDEX_FORMAT}-{TOKENIZER}-{catalog.products_digest}" / "meta.json").is_file()
    assert first.search("coffee table") == second.search("coffee table")
    # the same products under the other goal set: one index (it reads the products only), two datasets
    synthetic = build_catalog(products, ins, human, source="c", human_goals=False)
    assert synthetic.digest != catalog.digest and synthetic.products_digest == catalog.products_digest
    assert SearchIndex(synthetic, cache_dir=tmp_path).cached


def test_an_index_built_in_chunks_is_the_one_built_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = [tokenize(product_text(p)) for p in load_catalog(num_products=300).products]
    whole = BM25Index.build(
        docs, tmp_path / "whole"
    )  # one chunk: the whole-corpus computation bm25s is checked against
    monkeypatch.setattr(bm25, "CHUNK_DOCS", 7)
    monkeypatch.setattr(bm25, "BLOCK_POSTINGS", 100)  # many chunks merged in many blocks of terms
    chunked = BM25Index.build(docs, tmp_path / "chunked")
    assert list(whole.vocab) == list(chunked.vocab) and whole.num_docs == chunked.num_docs == 300
    for name in ("indptr", "docs", "data"):
        assert np.array_equal(np.load(whole.folder / f"{name}.npy"), np.load(chunked.folder / f"{name}.npy")), name


def test_terms_are_found_by_their_hash_and_compared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = BM25Index.build([["mug", "blue"], ["lamp"]], tmp_path / "i")
    assert [index.vocab.get(t) for t in ("mug", "blue", "lamp", "sofa")] == [0, 1, 2, None]  # by first appearance
    monkeypatch.setattr(bm25, "term_hash", lambda term: 7)  # every key collides: the stored terms tell them apart
    colliding = BM25Index.build([["mug", "blue"], ["lamp"]], tmp_path / "j")
    assert [colliding.vocab.get(t) for t in ("mug", "blue", "lamp", "sofa")] == [0, 1, 2, None]
    assert (
        "lamp" in colliding.vocab and "sofa" not in colliding.vocab and list(colliding.vocab) == ["mug", "blue", "lamp"]
    )


def test_the_splits_of_one_product_list_share_one_index() -> None:
    test, verl = load_split_catalog("test"), load_split_catalog("verl-agent-test")
    assert test.digest != verl.digest  # different goals: different datasets in the spec
    assert shared_index(test) is shared_index(verl)
    assert Catalog(test.products, {}, [], "t", "d").products_digest == test.products_digest  # computed when not given


def test_documents_are_webshops_fields(make_product) -> None:
    """convert_product_file_format.py: title, description, BulletPoints[0], "name: v, v" joined by ", and "; lower-cased."""
    p = make_product(bullet_points=["Crew Neck", "Tumble DRY"], description="A Classic fit tee.")
    assert product_text(p) == (
        "acme cotton men's t-shirt, black a classic fit tee. crew neck color: black, navy blue, and size: small, large"
    )
    assert (
        product_text(make_product(bullet_points=[], options={}))
        == "acme cotton men's t-shirt, black a classic fit tee.  "
    )


def test_only_the_first_bullet_point_is_searched(tmp_path: Path, make_product) -> None:
    shirt = make_product(bullet_points=["Crew neck", "Tumble dry"])
    other = make_product(
        asin="B000OTHERX", title="Plain Mug", bullet_points=["Dishwasher safe"], options={}, description=""
    )
    catalog = Catalog(products=[shirt, other], prices={}, goals=[], source="t", digest="fields-test")
    index = SearchIndex(catalog, cache_dir=tmp_path)
    assert index.search("crew") == [shirt.asin] and index.search("tumble") == []
    assert index.search("navy size") == [shirt.asin]  # option names and values are in the document


def test_scores_are_lucene_bm25_with_anserinis_defaults(tmp_path: Path) -> None:
    catalog = load_catalog()
    index = SearchIndex(catalog, cache_dir=tmp_path)
    docs = [tokenize(product_text(p)) for p in catalog.products]
    n, avgdl = len(docs), sum(map(len, docs)) / len(docs)
    query = tokenize("wireless noise cancelling earbuds black")

    def lucene(doc: list[str]) -> float:  # Lucene >= 8 BM25Similarity (no (k1 + 1) factor)
        total = 0.0
        for term in query:
            df, tf = sum(term in d for d in docs), doc.count(term)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            total += idf * tf / (tf + BM25_K1 * (1 - BM25_B + BM25_B * len(doc) / avgdl))
        return total

    expected = np.array([lucene(d) for d in docs])
    # the index keeps float32 scores: each of the ~5 summed terms carries a relative error of a few float32 ulps
    # (2**-24 ≈ 6e-8), so 1e-5 relative (plus 1e-6 absolute for zeros) bounds the difference generously.
    assert np.allclose(index.bm25.scores(query), expected, rtol=1e-5, atol=1e-6)
    assert (BM25_K1, BM25_B) == (0.9, 0.4)
