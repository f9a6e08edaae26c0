"""How often BM25 puts a goal's target product in the top 10 / top 50 (the first results page / all results).

Queries: each goal's instruction without its price clause (what an agent types first) and the
goal's ``query`` (the product's scraped query). On the generated catalog unless ``--data-dir``:

    OMP_NUM_THREADS=1 python benchmarks/webshop_search_recall.py [--split test] [--goals 20,500] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path


def recall(split: str, counts: list[int], data_dir: str | None) -> list[str]:
    from sapo_gym.webshop.dataset import load_split_catalog
    from sapo_gym.webshop.search import TOKENIZER, SearchIndex

    catalog = load_split_catalog(split, data_dir)
    with tempfile.TemporaryDirectory() as cache:
        index = SearchIndex(catalog, cache_dir=Path(cache))
    goals = [catalog.goals[i] for i in catalog.goal_indices(split)]
    queries = {
        "instruction": lambda g: g.instruction_text.split(", and price lower than")[0],
        "goal.query": lambda g: g.query,
    }
    rows = [f"{catalog.source} ({len(catalog.products)} products), split {split}, index {TOKENIZER}"]
    for n in counts:
        for name, query in queries.items():
            ranks = [index.search(query(g)) for g in goals[:n]]
            top10 = sum(g.asin in r[:10] for g, r in zip(goals, ranks))
            top50 = sum(g.asin in r for g, r in zip(goals, ranks))
            rows.append(
                f"first {n:>4} goals, query = {name:<11}: target in top 10 {top10:>4}/{n}, in top 50 {top50:>4}/{n}"
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", default="test", help="whose goals (test, verl-agent-test)")
    parser.add_argument("--goals", default="20,500", help="comma-separated numbers of goals (from the split's first)")
    parser.add_argument("--data-dir", default=None, help="WebShop's files (else the generated catalog)")
    args = parser.parse_args()
    print("\n".join(recall(args.split, [int(n) for n in args.goals.split(",")], args.data_dir)))


if __name__ == "__main__":
    main()
