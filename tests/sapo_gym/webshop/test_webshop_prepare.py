"""``sapo-gym data webshop --prepare``: it builds the caches an env reads, and an env built after it builds nothing."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from sapo_gym.webshop import data, dataset, noun_table, search, store, store_goals
from sapo_gym.webshop.bm25 import BM25Index
from sapo_gym.webshop.catalog import SPLITS
from sapo_gym.webshop.env import WebShopEnv
from sapo_gym.webshop.nouns import NOUNS_ENV, spacy_model_package
from sapo_gym.webshop.prepare import cache_entries, prepare_caches, prepared_splits
from sapo_gym.webshop.synthetic import write_catalog


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache of this test's own, and no catalog, index or noun rule remembered in this process."""
    root = tmp_path / "cache"
    monkeypatch.setenv("SAPO_GYM_CACHE", str(root))
    if (
        spacy_model_package() is None
    ):  # no table ships for this catalog: without spaCy the env's rule is the offline one
        monkeypatch.setenv(NOUNS_ENV, "offline")
    _forget_in_process()
    yield root
    _forget_in_process()


def _forget_in_process() -> None:
    dataset._load.cache_clear()
    search._SHARED.clear()
    noun_table._rule.cache_clear()


@pytest.fixture(scope="module")
def catalog_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("full")
    write_catalog(folder, 600, seed=3, names="full")
    return folder


def _builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Spy on every cache build an env can start; the list names each one started."""
    started: list[str] = []

    def spy(name: str, real):
        def wrapped(*args, **kwargs):
            started.append(name)
            return real(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(store, "_build", spy("store", store._build))
    monkeypatch.setattr(store_goals, "_drawn", spy("goals", store_goals._drawn))
    monkeypatch.setattr(BM25Index, "build", spy("index", BM25Index.build))
    monkeypatch.setattr(noun_table, "build_mapped_table", spy("nouns", noun_table.build_mapped_table))
    return started


def _mtimes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")}


def _play_each_split(catalog_dir: Path) -> None:
    for split in SPLITS:
        env = WebShopEnv(data_dir=catalog_dir, catalog="full", split=split)
        env.reset(seed=0, options={"task_index": 0})  # the first session opens the search index
        env.step("search[cotton shirt]")


def test_an_env_after_prepare_builds_nothing(catalog_dir: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started = _builds(monkeypatch)
    lines: list[str] = []
    steps = prepare_caches(catalog_dir, "full", report=lines.append)
    spacy = os.environ.get(NOUNS_ENV) != "offline"
    # one store, the goals of the synthetic splits' seed, one index, one noun table (with spaCy)
    assert sorted(started) == sorted(["store", "goals", "index"] + (["nouns"] * spacy))
    built = {entry.split("-")[0] for step in steps for entry in step.built}
    assert {"store2", "bm25np2", "file"} | ({"nouns2"} if spacy else set()) <= built
    assert any(e.endswith("/goals-seed1000") for step in steps for e in step.built)
    assert any(line.endswith(" s") and "built" in line for line in lines)
    _forget_in_process()
    started.clear()
    before = _mtimes(cache)
    _play_each_split(catalog_dir)
    assert started == []
    assert _mtimes(cache) == before


def test_an_env_without_prepare_builds_the_same_caches(catalog_dir: Path, cache: Path) -> None:
    _play_each_split(catalog_dir)
    by_env = cache_entries(cache)
    _forget_in_process()
    steps = prepare_caches(catalog_dir, "full", report=lambda line: None)
    assert all(step.built == () for step in steps)
    assert cache_entries(cache) == by_env


def test_prepared_splits_need_the_human_file_for_human_goals() -> None:
    assert prepared_splits(True) == list(SPLITS)
    assert prepared_splits(False) == ["verl-agent-test", "verl-agent-train"]


def test_the_data_command_prepares_and_says_where(
    catalog_dir: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    data.register_data_cli(parser.add_subparsers())
    args = parser.parse_args(["webshop", "--data-dir", str(catalog_dir), "--catalog", "full", "--prepare"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert str(cache / "webshop") in out and "BM25 index of 600 products: built bm25np2-" in out
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "ready: 0 cache entries built" in out and "built bm25np2" not in out


def test_prepare_needs_the_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(dataset.DATA_ENV, raising=False)
    parser = argparse.ArgumentParser()
    data.register_data_cli(parser.add_subparsers())
    args = parser.parse_args(["webshop", "--catalog", "full", "--prepare"])
    with pytest.raises(ValueError, match="--data-dir"):
        args.func(args)
