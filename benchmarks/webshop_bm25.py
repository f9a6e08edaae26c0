"""WebShop's BM25 index: the numpy index (sapo_gym/webshop/search.py) beside bm25s 0.3.16 (the library it replaced).

On generated catalogs, from the same tokenized documents: index build (ours: written to its folder of mapped
arrays as it builds), bm25s's save, the load of each on-disk cache (ours: mapping the arrays), and the
score of one query (every goal instruction of the catalog, as the shop's search issues them), with the number of
queries whose float32 scores differ (0 expected). Tokenizing the documents is shared and reported once.

    OMP_NUM_THREADS=1 python benchmarks/webshop_bm25.py [--sizes 1000,10000,50000] [--repeats 3]

Needs bm25s (the dev extra).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def _best(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def _query_us(score: Callable[[list[str]], np.ndarray], queries: list[list[str]]) -> float:
    t = time.perf_counter()
    for q in queries:
        score(q)
    return (time.perf_counter() - t) / len(queries) * 1e6


def measure(n: int, repeats: int) -> dict[str, float]:
    import bm25s

    from sapo_gym.webshop.dataset import load_catalog
    from sapo_gym.webshop.search import BM25_B, BM25_K1, BM25Index, product_text, tokenize

    catalog = load_catalog(num_products=n)
    t = time.perf_counter()
    docs = [tokenize(product_text(p)) for p in catalog.products]
    row: dict[str, float] = {"tokenize_s": time.perf_counter() - t}

    def build_ref() -> Any:
        ref = bm25s.BM25(k1=BM25_K1, b=BM25_B, method="lucene")
        ref.index(docs, show_progress=False)
        return ref

    row["build_bm25s_s"], ref = _best(build_ref, repeats)
    with tempfile.TemporaryDirectory() as tmp:
        ref_dir, ours_dir = Path(tmp) / "bm25s", Path(tmp) / "ours"
        row["build_numpy_s"], ours = _best(
            lambda: BM25Index.build(docs, ours_dir / str(time.perf_counter_ns())), repeats
        )
        row["save_bm25s_s"], _ = _best(lambda: ref.save(str(ref_dir), show_progress=False), 1)
        row["load_bm25s_s"], _ = _best(
            lambda: bm25s.BM25.load(str(ref_dir), load_vocab=True, show_progress=False), repeats
        )
        row["load_numpy_s"], _ = _best(lambda: BM25Index.load(ours.folder), repeats)
    queries = [[t for t in tokenize(g.instruction_text) if t in ours.vocab] for g in catalog.goals]
    queries = [q for q in queries if q]
    row["query_bm25s_us"] = _query_us(ref.get_scores, queries)
    row["query_numpy_us"] = _query_us(ours.scores, queries)
    row["queries"] = len(queries)
    row["differ"] = sum(not np.array_equal(ours.scores(q), ref.get_scores(q)) for q in queries)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(
        "| products | tokenize | build bm25s | build numpy | load bm25s | load numpy | query bm25s | query numpy "
        "| queries | scores differ |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in (int(s) for s in args.sizes.split(",")):
        r = measure(n, args.repeats)
        print(
            f"| {n:,} | {r['tokenize_s']:.2f} s | {r['build_bm25s_s']:.3f} s | {r['build_numpy_s']:.3f} s "
            f"| {r['load_bm25s_s'] * 1e3:.1f} ms | {r['load_numpy_s'] * 1e3:.1f} ms | {r['query_bm25s_us']:.0f} µs "
            f"| {r['query_numpy_us']:.0f} µs | {r['queries']:,} | {r['differ']} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
