"""Which catalog is read, the named goal splits and how goals are loaded (skip rule, seeds, order)."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest

from sapo_gym.webshop.catalog import GOAL_SPLITS, PRICE_GRID, SPLITS, build_catalog
from sapo_gym.webshop.dataset import CATALOGS, HUMAN_FILE, find_files, load_catalog, load_split_catalog
from sapo_gym.webshop.env import WebShopEnv
from sapo_gym.webshop.generate import generate_raw


def _write(folder: Path, choice: str, n: int, seed: int) -> None:
    products, ins, human = generate_raw(n, seed)
    for name, blob in zip((*CATALOGS[choice], HUMAN_FILE), (products, ins, human)):
        (folder / name).write_text(json.dumps(blob))


def test_both_pairs_present_reads_the_1k_pair_unless_full_is_asked(tmp_path: Path) -> None:
    _write(tmp_path, "full", 40, seed=1)
    _write(tmp_path, "1k", 25, seed=2)  # both pairs, as verl-agent's setup.sh -d all leaves them
    assert find_files(tmp_path).products.name == "items_shuffle_1000.json"
    assert len(load_catalog(tmp_path).products) == 25
    assert len(load_catalog(tmp_path, catalog="full").products) == 40
    assert WebShopEnv(data_dir=tmp_path, split="test").spec_fields()["catalog"] == "1k"
    assert WebShopEnv(data_dir=tmp_path, split="test", catalog="full").spec_fields()["catalog"] == "full"
    assert WebShopEnv(split="test").spec_fields()["catalog"] == "generated"


def test_a_missing_pair_is_an_error_that_names_the_other(tmp_path: Path) -> None:
    _write(tmp_path, "full", 20, seed=3)
    with pytest.raises(FileNotFoundError, match=r"items_shuffle_1000\.json.*pass catalog='full'"):
        load_catalog(tmp_path)
    with pytest.raises(ValueError, match=r"valid choices: \['1k', 'full'\]"):
        load_catalog(tmp_path, catalog="10k")
    with pytest.raises(ValueError, match="reads WebShop's files"):
        WebShopEnv(split="test", catalog="full")  # the generated catalog is neither pair


def test_each_split_has_its_goals_seed_and_spec_hash() -> None:
    envs = {s: WebShopEnv(split=s) for s in SPLITS}
    assert len({e.spec_hash() for e in envs.values()}) == len(SPLITS)
    for name, env in envs.items():
        split = GOAL_SPLITS[name]
        assert env.spec_fields()["goals"] == {"set": split.goals, "seed": split.seed, "part": split.part}
        assert env.catalog.goal_set == split.goals and env.catalog.goal_seed == split.seed
    test, train = envs["verl-agent-test"], envs["verl-agent-train"]
    assert len(test.task_ids) == 500 and len(train.task_ids) == len(train.catalog.goals) - 500
    goal_key = lambda g: (g.asin, tuple(g.goal_options), g.instruction_text)  # noqa: E731
    assert not {goal_key(test.goal(i)) for i in range(500)} & {
        goal_key(train.goal(i)) for i in range(len(train.task_ids))
    }
    assert envs["test"].goal(0) != test.goal(0)  # verl-agent's test goals are not WebShop's seed-233 human goals


def _raw_with_edge_instructions() -> tuple[list, dict, dict]:
    products, ins, human = generate_raw(60, seed=9)
    asins = [p["asin"] for p in products]
    ins[asins[3]]["instruction"] = ""  # WebShop keeps it: its goals read "" + options + price
    ins[asins[5]]["instruction"] = None  # WebShop skips it
    del ins[asins[7]]  # no record: WebShop would fail (KeyError); skipped here
    products[11]["pricing"] = ""  # WebShop's $100 default: no draw
    products[13]["pricing"] = "$12.50"  # one price: no draw
    products.append(dict(products[0]))  # a duplicate asin: dropped
    return products, ins, human


def _verl_agent_synthetic_order(catalog, ins: dict, seed: int) -> list[tuple]:
    """verl-agent's loading written out against the global ``random``: seed, prices, caps, reseed, shuffle."""
    random.seed(seed)
    prices = {p.asin: p.pricing[0] if len(p.pricing) == 1 else random.uniform(*p.pricing[:2]) for p in catalog.products}
    goals = []
    for p in catalog.products:
        if (ins.get(p.asin) or {}).get("instruction") is None:
            continue
        above = [x for x in PRICE_GRID if x > prices[p.asin]][:4]
        upper = sorted(random.sample(above, 2))[1] if len(above) >= 2 else 1_000_000.0
        names = sorted(p.options)
        goals += [(p.asin, combo, upper) for combo in itertools.product(*(p.options[n] for n in names))]
    random.seed(seed)
    random.shuffle(goals)
    return goals


@pytest.mark.parametrize("seed", [1000, 1003, 233])
def test_synthetic_goals_follow_verl_agents_seeded_order(seed: int) -> None:
    products, ins, human = _raw_with_edge_instructions()
    catalog = build_catalog(products, ins, human, source="edge", human_goals=False, goal_seed=seed)
    expected = _verl_agent_synthetic_order(catalog, ins, seed)
    assert [(g.asin, tuple(g.goal_options), g.price_upper) for g in catalog.goals] == expected
    asins = [p["asin"] for p in products]
    assert asins[3] in {g.asin for g in catalog.goals}  # the "" instruction made goals
    assert not {asins[5], asins[7]} & {g.asin for g in catalog.goals}
    assert len(catalog.products) == 60


def test_human_goals_skip_only_goals_without_attributes() -> None:
    products, ins, human = generate_raw(30, seed=4)
    first, second = products[0]["asin"], products[1]["asin"]
    human[first][0]["instruction"] = ""  # kept: WebShop skips on empty attributes only
    human[second][0]["instruction_attributes"] = []  # skipped
    catalog = build_catalog(products, ins, human, source="h")
    texts = [(g.asin, g.instruction_text) for g in catalog.goals]
    assert sum(len(v) for v in human.values()) - 1 == len(catalog.goals)
    assert any(a == first and t.split(", and price lower than")[0] == "" for a, t in texts)


def test_split_catalogs_are_shared_per_process() -> None:
    assert load_split_catalog("verl-agent-test") is load_split_catalog("verl-agent-train")
    assert load_split_catalog("test") is load_split_catalog("train") is load_catalog()
