"""WebShop text-mode latency on generated catalogs of 1k and 10k products (and, optionally, browser mode).

Measures, side by side in one run:

* catalog build (generate + load) and BM25 index build (cold) / load from the disk cache (warm);
* ``env.step`` latency of the oracle's episodes on test goals: every step, clicks only, searches only;
* raw ``SearchIndex.search`` latency on the goals' queries.

    OMP_NUM_THREADS=1 python benchmarks/webshop_latency.py [--sizes 1000,10000] [--episodes 200] [--split test]
        [--browser]

The target is a p50 step of at most 2 ms on 1k and 10k products.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from agents.base import format_action


@dataclass
class Timings:
    """Seconds per measured call, by kind."""

    step: list[float] = field(default_factory=list)
    click: list[float] = field(default_factory=list)
    search_step: list[float] = field(default_factory=list)
    search: list[float] = field(default_factory=list)
    build: dict[str, float] = field(default_factory=dict)


def _ms(values: list[float], q: float) -> float:
    return float(np.percentile(values, q) * 1e3) if values else float("nan")


def measure(env_cls: type, num_products: int, episodes: int, label: str, split: str = "test") -> Timings:
    from sapo_gym.webshop.dataset import load_split_catalog
    from sapo_gym.webshop.search import SearchIndex

    t = Timings()
    start = time.perf_counter()
    catalog = load_split_catalog(split, num_products=num_products)
    t.build["catalog_s"] = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as cache:
        start = time.perf_counter()
        SearchIndex(catalog, cache_dir=Path(cache))
        t.build["index_cold_s"] = time.perf_counter() - start
        start = time.perf_counter()
        index = SearchIndex(catalog, cache_dir=Path(cache))
        t.build["index_warm_s"] = time.perf_counter() - start
    env = env_cls(num_products=num_products, split=split)
    for i in tqdm(range(episodes), desc=f"{label} {num_products:>6} products", leave=False):
        _, info = env.reset(options={"task_index": i % len(env.task_ids)})
        for _ in range(15):
            action = info["expert_action"]
            start = time.perf_counter()
            _, _, terminated, _, info = env.step(format_action(action, "plan"))
            dt = time.perf_counter() - start
            t.step.append(dt)
            (t.search_step if action.startswith("search[") else t.click).append(dt)
            if terminated:
                break
    for goal in catalog.goals[:episodes]:
        start = time.perf_counter()
        index.search(goal.query)
        t.search.append(time.perf_counter() - start)
    env.close()
    return t


def table(results: dict[tuple[str, int], Timings]) -> str:
    rows = [
        f"{'mode':8} {'products':>9} {'step p50':>9} {'step p95':>9} {'click p50':>10} {'search-step p50':>16} "
        f"{'search p50':>11} {'search p95':>11} {'catalog s':>10} {'index cold s':>13} {'index warm s':>13}"
    ]
    for (mode, n), t in results.items():
        rows.append(
            f"{mode:8} {n:>9} {_ms(t.step, 50):>8.3f}m {_ms(t.step, 95):>8.3f}m {_ms(t.click, 50):>9.3f}m "
            f"{_ms(t.search_step, 50):>15.3f}m {_ms(t.search, 50):>10.3f}m {_ms(t.search, 95):>10.3f}m "
            f"{t.build['catalog_s']:>10.2f} {t.build['index_cold_s']:>13.2f} {t.build['index_warm_s']:>13.2f}"
        )
    text = [(mode, n) for mode, n in results if mode == "text"]
    if len(text) >= 2:
        (_, small), (_, big) = text[0], text[-1]
        a, b = results[("text", small)], results[("text", big)]
        rows.append(
            f"ratio {big}/{small} products: step p50 x{_ms(b.step, 50) / _ms(a.step, 50):.2f}, "
            f"search p50 x{_ms(b.search, 50) / _ms(a.search, 50):.2f}"
        )
    return "\n".join(rows) + "\n(m = milliseconds)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated catalog sizes")
    parser.add_argument("--split", default="test", help="goals of the episodes (test, verl-agent-test)")
    parser.add_argument("--episodes", type=int, default=200, help="oracle episodes per size (test goals)")
    parser.add_argument(
        "--browser", action="store_true", help="also time browser mode on the smallest size (20 episodes)"
    )
    args = parser.parse_args()
    from trainers.hardware import describe

    print(describe())  # kernels, rounding and dtype speed differ between CPUs: every table says which ran it
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from sapo_gym.webshop.env import WebShopEnv

    sizes = [int(s) for s in args.sizes.split(",")]
    results = {("text", n): measure(WebShopEnv, n, args.episodes, "text", args.split) for n in sizes}
    if args.browser:
        from sapo_gym.webshop.browser import WebShopBrowserEnv

        results[("browser", sizes[0])] = measure(WebShopBrowserEnv, sizes[0], 20, "browser", args.split)
    print(table(results))


if __name__ == "__main__":
    main()
