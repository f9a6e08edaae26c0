"""Where one ``sapo-gym train --env sapo/WebShop-v0`` iteration's time goes: startup parts and iteration phases.

One process does what ``sapo-gym train --algo sapo --env sapo/WebShop-v0 --iterations 1
--episodes-per-iteration 2`` does before its final evaluation, timing each part in order:

* startup: importing ``sapo_gym`` + the WebShop env (no torch), importing torch / transformers / the
  trainer, building the catalog, reading the noun table, loading the BM25 index from the disk cache,
  and the rest of ``Trainer(cfg)`` (the tiny policy, the reference, optimizers, the two envs);
* one iteration (:meth:`trainers.loop.Trainer.run_iteration`): generation, split into prompt encoding
  (chat template + tokenizer) and sampling (the model's forward passes and draws), env steps
  (``time/reward``: the shop's pages, search and purchase scoring), and the learning phases.

Beside the table, costs a run does *not* pay (shown for scale, out of the total): building the index
cold (first run on a machine), spaCy's load + tagging of one title (the shipped noun table replaces it;
``--spacy``), and the purchase score of an oracle's ``Buy Now`` (the random policy never buys).
The final evaluation of ``sapo-gym train`` (every one of the 500 test goals, 16 at a time) is timed on its first
``--eval-tasks`` goals only (default: not at all).

    OMP_NUM_THREADS=1 python benchmarks/webshop_iteration.py [--episodes 2] [--max-response-tokens 512]
        [--spacy] [--eval-tasks 16]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def _import_trainer() -> None:
    import torch  # noqa: F401
    import transformers  # noqa: F401

    # transformers imports its model classes lazily, on the first model: count them as imports, not as Trainer(cfg)
    import agents.policy  # noqa: F401
    import trainers.loop  # noqa: F401


def startup(split: str) -> tuple[dict[str, float], dict[str, float]]:
    """(paid, not paid) seconds of the WebShop side of startup, from cold per-process caches."""
    paid: dict[str, float] = {}
    _, paid["import sapo_gym + WebShop env"] = _timed(lambda: __import__("sapo_gym.webshop.env"))
    from sapo_gym.webshop import dataset, noun_table, search

    _, paid["import torch + transformers + trainers"] = _timed(_import_trainer)
    dataset._load.cache_clear()
    catalog, paid["catalog (generate + build)"] = _timed(lambda: dataset.load_split_catalog(split))
    noun_table.shipped_table.cache_clear()
    noun_table._rule.cache_clear()
    _, paid["noun table (shipped, read)"] = _timed(lambda: noun_table.catalog_noun_rule(catalog))
    search._SHARED.clear()
    _, paid["BM25 index (disk cache, load)"] = _timed(lambda: search.shared_index(catalog))
    unpaid: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as cache:
        _, unpaid["BM25 index, cold build (first run only)"] = _timed(lambda: search.SearchIndex(catalog, Path(cache)))
    return paid, unpaid


def spacy_cost(title: str) -> float | None:
    """spaCy's import + model load + one title's tags (what the shipped table saves), or None without spaCy."""
    from sapo_gym.webshop.nouns import noun_rule, spacy_model_package

    if spacy_model_package() is None:
        return None
    return _timed(lambda: noun_rule("spacy").nouns(title))[1]


def purchase_ms(episodes: int, split: str) -> float:
    """Median milliseconds of the oracle's ``Buy Now`` step (the purchase score) over ``episodes`` goals."""
    import statistics

    from agents.base import format_action
    from sapo_gym.webshop.env import WebShopEnv

    env, times = WebShopEnv(split=split), []
    for i in range(episodes):
        _, info = env.reset(options={"task_index": i})
        for _ in range(15):
            text = format_action(info["expert_action"], "plan")
            start = time.perf_counter()
            _, _, done, _, info = env.step(text)
            if done:
                times.append(time.perf_counter() - start)
                break
    return statistics.median(times) * 1e3


def evaluation_s(trainer: Any, tasks: int) -> float:
    """Seconds of the final evaluation's first ``tasks`` test goals (``sapo-gym train`` plays all 500, 16 at a time)."""
    from sapo_gym.evaluation import evaluate as play
    from sapo_gym.webshop.env import WebShopEnv
    from trainers.agent_boundary import build_agent

    cfg = trainer.cfg
    agent = build_agent(trainer.rollout_policy, cfg, cfg.eval_temperature, trainer.agent.generator)
    ids = list(WebShopEnv(split="test").task_ids[:tasks])
    return _timed(
        lambda: play(
            agent, cfg.env, split="test", task_ids=ids, batch_size=16, env_kwargs=cfg.gym_make_kwargs(), progress=False
        )
    )[1]


def iteration(args: argparse.Namespace) -> tuple[dict[str, float], dict[str, Any]]:
    """Seconds of ``Trainer(cfg)`` and of each phase of one iteration, and the iteration's metrics row."""
    from trainers.config import TrainConfig
    from trainers.loop import Trainer

    cfg = TrainConfig(
        algo="sapo",
        env="sapo/WebShop-v0",
        iterations=1,
        episodes_per_iteration=args.episodes,
        max_response_tokens=args.max_response_tokens,
        progress=False,
        out_dir=tempfile.mkdtemp(prefix="sapo-webshop-bench-"),
    )
    trainer, setup_s = _timed(lambda: Trainer(cfg))
    encode, spent = trainer.policy.encode_prompts, [0.0]

    def timed_encode(*a: Any, **k: Any) -> Any:
        value, seconds = _timed(lambda: encode(*a, **k))
        spent[0] += seconds
        return value

    trainer.policy.encode_prompts = timed_encode
    trainer.start_reinforcement()
    row = trainer.run_iteration()
    if args.eval_tasks:
        row["eval_s"] = evaluation_s(trainer, args.eval_tasks)
    trainer.close()
    shutil.rmtree(cfg.out_dir, ignore_errors=True)
    t = {k.removeprefix("time/"): v for k, v in row.items() if k.startswith("time/")}
    phases = {
        "Trainer(cfg): policy, reference, optimizers, envs": setup_s,
        "generation: prompt encoding (template + tokenizer)": spent[0],
        "generation: sampling (model forward + draw)": t["generation"] - spent[0],
        "env steps: pages, search, purchase score": t["reward"],
        "old log-probs + reference (forward)": t["old_log_prob"] + t["reference"],
        "value + advantage": t["value"] + t["advantage"],
        "update (forward + backward + step)": t["update"],
    }
    return phases, row


WHOSE = {
    "import torch + transformers + trainers": "libraries",
    "generation: sampling (model forward + draw)": "model",
    "old log-probs + reference (forward)": "model",
    "update (forward + backward + step)": "model",
    "value + advantage": "trainer",
    "Trainer(cfg): policy, reference, optimizers, envs": "trainer",
    "generation: prompt encoding (template + tokenizer)": "agent",
}
"""Whose work each part is; the rest is the env's (``sapo_gym``, ``sapo_gym/webshop``)."""


def table(rows: dict[str, float]) -> str:
    total = sum(rows.values())
    lines = [f"{'part':52} {'seconds':>8} {'fraction':>9}  whose work", "-" * 80]
    for name, s in rows.items():
        lines.append(f"{name:52} {s:>8.3f} {s / total:>8.1%}  {WHOSE.get(name, 'env')}")
    lines += ["-" * 80, f"{'total (startup + one iteration)':52} {total:>8.3f} {1:>8.0%}"]
    for who in ("model", "libraries", "env", "agent", "trainer"):
        part = sum(s for n, s in rows.items() if WHOSE.get(n, "env") == who)
        lines.append(f"{'  of which ' + who:52} {part:>8.3f} {part / total:>8.1%}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=2, help="episodes per iteration (the issue's 2)")
    parser.add_argument("--max-response-tokens", type=int, default=512, help="sampling budget per turn (default 512)")
    parser.add_argument("--purchases", type=int, default=20, help="oracle episodes whose Buy Now step is timed")
    parser.add_argument(
        "--eval-tasks",
        type=int,
        default=0,
        help="also time the final evaluation on this many test goals (16 = one batch; 0 skips)",
    )
    parser.add_argument("--spacy", action="store_true", help="also time spaCy's load (what the shipped table avoids)")
    args = parser.parse_args()
    paid, unpaid = startup("train")
    from trainers.hardware import describe

    print(describe())  # kernels and dispatch overhead differ between CPUs: every table says which ran it
    print(
        f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}; {args.episodes} episodes, "
        f"max_response_tokens={args.max_response_tokens}, tiny random Qwen2 on CPU"
    )
    phases, row = iteration(args)
    print(table({**paid, **phases}))
    print(
        f"turns {row['rollout/turns']}, response tokens per turn {row['rollout/response_tokens']:.0f} "
        f"({row['rollout/response_truncated']} of the turns hit the budget), "
        f"time/iteration {row['time/iteration']:.3f} s"
    )
    if args.eval_tasks:
        unpaid[f"final evaluation, {args.eval_tasks} of the 500 test goals"] = row["eval_s"]
    unpaid["oracle Buy Now step (purchase score), median"] = purchase_ms(args.purchases, "test") / 1e3
    spacy_loaded = "spacy" in sys.modules
    if args.spacy:
        from sapo_gym.webshop.dataset import load_split_catalog

        cost = spacy_cost(load_split_catalog("test").goals[0].name)
        unpaid["spaCy import + load + one title (replaced by the table)"] = cost if cost is not None else float("nan")
    print("not paid by the iteration above (for scale):")
    for name, s in unpaid.items():
        print(f"  {name:58} {s * 1e3:>10.1f} ms")
    print(f"spaCy imported by the run and the purchases: {spacy_loaded}")


if __name__ == "__main__":
    main()
