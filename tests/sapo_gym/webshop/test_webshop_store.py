"""The full path (``catalog="full"``: the product store, goals made on access) against the small path (the
1k pair's loader, everything in memory): the same goals, pages and rewards for the same files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sapo_gym.webshop import noun_table
from sapo_gym.webshop.catalog import SPLITS, CatalogError
from sapo_gym.webshop.dataset import CATALOGS, HUMAN_FILE, load_catalog, load_split_catalog
from sapo_gym.webshop.env import WebShopEnv
from sapo_gym.webshop.generate import generate_raw
from sapo_gym.webshop.nouns import NOUNS_ENV, spacy_model_package
from sapo_gym.webshop.search import cache_root
from sapo_gym.webshop.store import StoreProducts, open_store
from sapo_gym.webshop.store_goals import SyntheticGoals
from sapo_gym.webshop.synthetic import write_catalog
from tests.support import webshop_play


def _both_pairs(folder: Path, products: object, ins: object, human: object) -> Path:
    """The same records under the 1k pair's names and the full pair's: one folder, both choices."""
    folder.mkdir(parents=True, exist_ok=True)
    for pair in CATALOGS.values():
        for name, blob in zip((*pair, HUMAN_FILE), (products, ins, human)):
            (folder / name).write_text(json.dumps(blob))
    return folder


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _both_pairs(tmp_path_factory.mktemp("generated"), *generate_raw(1000))


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("synthetic")
    write_catalog(folder, 1010, seed=5, names="1k")
    write_catalog(folder, 1010, seed=5, names="full")
    return folder


@pytest.fixture
def nouns_without_spacy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A catalog the package ships no noun table for needs spaCy to tag it: without it, both paths use the offline rule."""
    if spacy_model_package() is None:
        monkeypatch.setenv(NOUNS_ENV, "offline")


def _played(env: WebShopEnv, goals: range) -> tuple[list, list]:
    episodes = []
    for i in goals:
        steps = [json.loads(s) for s in webshop_play.episode(env, i)]
        for step in steps:
            step[-1].pop("dataset")  # names the source folder and the digest: the only difference allowed
        episodes.append(steps)
    return episodes, webshop_play.purchases(env, goals, env.nouns)


def _assert_same_shop(folder: Path, split: str, every: int) -> None:
    small = WebShopEnv(data_dir=folder, catalog="1k", split=split)
    full = WebShopEnv(data_dir=folder, catalog="full", split=split)
    assert isinstance(full.catalog.products, StoreProducts) and isinstance(small.catalog.products, list)
    assert full.task_ids == small.task_ids and full.nouns.id == small.nouns.id
    assert [full.goal(i) for i in range(len(full.task_ids))] == [small.goal(i) for i in range(len(small.task_ids))]
    assert dict(full.catalog.prices) == small.catalog.prices
    goals = range(0, len(full.task_ids), every)
    assert _played(full, goals) == _played(small, goals)


@pytest.mark.parametrize("split", SPLITS)
def test_the_full_path_plays_the_generated_catalog_as_the_small_path(generated: Path, split: str) -> None:
    _assert_same_shop(generated, split, every=41)


@pytest.mark.parametrize("split", ["test", "verl-agent-test"])
def test_the_full_path_plays_a_synthetic_catalog_as_the_small_path(
    synthetic: Path, split: str, nouns_without_spacy: None
) -> None:
    _assert_same_shop(synthetic, split, every=53)


def test_a_prefix_of_the_full_files_is_the_prefix_of_the_small_path(generated: Path) -> None:
    for split in ("test", "verl-agent-train"):
        full = load_split_catalog(split, generated, catalog="full", num_products=300)
        small = load_split_catalog(split, generated, catalog="1k", num_products=300)
        assert len(full.products) == 300 and list(full.goals) == list(small.goals)


def test_synthetic_goals_are_made_on_access_as_a_sequence(generated: Path) -> None:
    full = load_split_catalog("verl-agent-test", generated, catalog="full")
    small = load_split_catalog("verl-agent-test", generated, catalog="1k")
    goals = full.goals
    assert isinstance(goals, SyntheticGoals) and len(goals) == len(small.goals) == 5867
    assert goals[-1] == small.goals[-1] and goals[10:13] == small.goals[10:13] and goals[::1000] == small.goals[::1000]
    with pytest.raises(IndexError):
        goals[len(goals)]


def test_a_process_maps_none_of_the_cache_files_it_reads(generated: Path) -> None:
    """A mapped page would count in the memory of every process that touched it (with its neighbours): the store,
    the goal arrays, the index and the noun table are read with ``pread``, so each process holds only what it keeps."""
    maps = Path("/proc/self/maps")
    if not maps.is_file():
        pytest.skip("needs Linux's /proc/self/maps")
    for split in ("test", "verl-agent-test"):
        env = WebShopEnv(data_dir=generated, catalog="full", split=split)
        _played(env, range(0, len(env.task_ids), 50))
    cache = str(cache_root())
    assert [line for line in maps.read_text().splitlines() if cache in line] == []


def test_the_store_is_built_once_and_keyed_by_the_files_content(generated: Path, tmp_path: Path) -> None:
    pair = [generated / name for name in CATALOGS["full"]]
    first = open_store(*pair)
    stamp = (first.folder / "meta.json").stat().st_mtime_ns
    again = open_store(*pair)
    assert (
        again.folder == first.folder and (again.folder / "meta.json").stat().st_mtime_ns == stamp
    )  # read, not rebuilt
    copy = [tmp_path / p.name for p in pair]
    for src, dst in zip(pair, copy):
        dst.write_bytes(src.read_bytes())
    assert open_store(*copy).folder == first.folder  # the same bytes elsewhere: the same store
    products = json.loads(copy[0].read_text())
    products[0]["name"] += " (changed)"
    copy[0].write_text(json.dumps(products))
    changed = open_store(*copy)
    assert changed.folder != first.folder and changed.product(0).title.endswith("(changed)")


def test_a_cache_that_cannot_be_written_still_gives_the_catalog(
    generated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("SAPO_GYM_CACHE", str(blocker / "cache"))  # every mkdir under it fails
    catalog = load_split_catalog("verl-agent-test", generated, catalog="full", num_products=50)
    assert len(catalog.products) == 50 and catalog.goals[0].asin in catalog.by_asin


@pytest.mark.parametrize(
    "mutate, file, field",
    [
        (lambda p, i, h: p[3].pop("name"), "items_shuffle.json", "'name'"),
        (lambda p, i, h: p[2].update(pricing="twelve dollars"), "items_shuffle.json", "'pricing'"),
        (
            lambda p, i, h: i[p[1]["asin"]].update(instruction_attributes="big"),
            "items_ins_v2.json",
            "'instruction_attributes'",
        ),
        (lambda p, i, h: h[p[0]["asin"]][0].pop("instruction"), "items_human_ins.json", "'instruction'"),
    ],
)
def test_malformed_full_files_name_the_file_and_field(tmp_path: Path, mutate, file: str, field: str) -> None:
    products, ins, human = generate_raw(8, seed=4)
    mutate(products, ins, human)
    folder = _both_pairs(tmp_path, products, ins, human)
    with pytest.raises(CatalogError) as err:
        load_catalog(folder, catalog="full")
    assert file in str(err.value) and field in str(err.value)
    (folder / "items_shuffle.json").write_text('[{"asin": "B01", ')
    with pytest.raises(CatalogError, match="items_shuffle.json: record #0: .*not valid JSON"):
        load_catalog(folder, catalog="full", num_products=7)


def test_a_store_catalogs_noun_table_is_tagged_once_and_read_without_spacy(
    synthetic: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if spacy_model_package() is None:
        pytest.skip("spaCy or an en_core_web_sm package is not installed (the nlp extra)")
    noun_table._rule.cache_clear()
    catalog = load_split_catalog("test", synthetic, catalog="full", num_products=120)
    rule = noun_table.catalog_noun_rule(catalog)
    (folder,) = noun_table._cache_dir().glob(f"nouns2-p{catalog.products_digest}-*")
    live = noun_table.noun_rule("spacy")
    titles = [p.title for p in catalog.products]
    assert rule.id == live.id and [rule.nouns(t) for t in titles] == [live.nouns(t) for t in titles]  # title by title
    noun_table._rule.cache_clear()
    monkeypatch.setattr(noun_table, "spacy_model_package", lambda: None)  # as without spaCy: the mapped table scores
    again = noun_table.catalog_noun_rule(catalog)
    assert again.id == rule.id and [again.nouns(t) for t in titles] == [rule.nouns(t) for t in titles]
    noun_table._rule.cache_clear()
    assert os.path.isdir(folder)


def test_an_asin_outside_ascii_is_found_as_the_small_path_finds_it(tmp_path: Path) -> None:
    products, ins, human = generate_raw(12, seed=8)
    odd = "Bé€0000001"  # ten characters, more than ten bytes in UTF-8
    ins[odd], human[odd] = ins.pop(products[3]["asin"]), human.pop(products[3]["asin"])
    products[3]["asin"] = odd
    folder = _both_pairs(tmp_path, products, ins, human)
    full, small = load_catalog(folder, catalog="full"), load_catalog(folder, catalog="1k")
    assert list(full.asins) == small.asins and full.by_asin[odd] == small.by_asin[odd]
    assert "Be€0000001" not in full.by_asin and "B" not in full.by_asin and list(full.goals) == small.goals
