"""WebShop's own files (``SAPO_WEBSHOP_DATA``): goal order and counts on real data; skipped without them.

``human_goals.json`` is WebShop's ``baseline_models/data/human_goals.json`` (in its repository): the
human instructions in the seed-233 goal order its baselines index (test = 0-499), processed as its
``train_search_il.py`` ``process_goal`` does (lower-cased, quotes dropped, the price clause cut). Its
baselines ran on the full product set (README: the 1k pair is the default "for a faster preview").
"""

from __future__ import annotations

import itertools
import json
import os
import random
from pathlib import Path

import pytest

from sapo_gym.webshop.dataset import CATALOGS, DATA_ENV, HUMAN_FILE, load_split_catalog

pytestmark = pytest.mark.needs_data
PRICE_CLAUSE = ", and price lower than"


def _folder_with(*names: str) -> Path:
    if not os.environ.get(DATA_ENV):
        pytest.skip(f"{DATA_ENV} is not set")
    folder = Path(os.environ[DATA_ENV]).expanduser()
    missing = [n for n in names if not (folder / n).is_file()]
    if missing:
        pytest.skip(f"{folder} lacks {missing}")
    return folder


def _products_in_file_order(path: Path) -> list[dict]:
    """WebShop's ``load_products`` filter: asin 'nan' or longer than 10 characters, then repeats, dropped."""
    seen, kept = set(), []
    for p in json.loads(path.read_text()):
        if p["asin"] == "nan" or len(p["asin"]) > 10 or p["asin"] in seen:
            continue
        seen.add(p["asin"])
        kept.append(p)
    return kept


def _process_goal(text: str) -> str:
    return text.lower().replace('"', "").replace("'", "").split(PRICE_CLAUSE)[0].strip()


@pytest.mark.slow
def test_human_goal_order_matches_webshops_human_goals_json() -> None:
    folder = _folder_with(*CATALOGS["full"], HUMAN_FILE, "human_goals.json")
    expected = json.loads((folder / "human_goals.json").read_text())
    catalog = load_split_catalog("test", folder, catalog="full")
    assert [_process_goal(g.instruction_text) for g in catalog.goals] == expected


@pytest.mark.parametrize("choice", ["1k", pytest.param("full", marks=pytest.mark.slow)])
def test_human_goals_are_the_files_instructions_shuffled_with_seed_233(choice: str) -> None:
    folder = _folder_with(*CATALOGS[choice], HUMAN_FILE)
    human = json.loads((folder / HUMAN_FILE).read_text())
    unshuffled = [
        (p["asin"], ins["instruction"].strip("."))
        for p in _products_in_file_order(folder / CATALOGS[choice][0])
        for ins in human.get(p["asin"], [])
        if ins["instruction_attributes"]
    ]
    random.Random(233).shuffle(unshuffled)
    catalog = load_split_catalog("test", folder, catalog=choice)
    assert [(g.asin, g.instruction_text.split(PRICE_CLAUSE)[0]) for g in catalog.goals] == unshuffled


def test_verl_agent_split_counts_every_option_combination_of_the_1k_pair() -> None:
    folder = _folder_with(*CATALOGS["1k"])
    ins = json.loads((folder / CATALOGS["1k"][1]).read_text())
    expected = 0
    for p in _products_in_file_order(folder / CATALOGS["1k"][0]):
        if (ins.get(p["asin"]) or {}).get("instruction") is None:
            continue
        options = {name.lower(): v for name, v in (p.get("customization_options") or {}).items() if v is not None}
        expected += len(list(itertools.product(*options.values())))
    catalog = load_split_catalog("verl-agent-test", folder)
    assert len(catalog.goals) == expected and catalog.goal_set == "synthetic"
