"""Catalog loading (WebShop's raw schema), the generator, goals, splits and malformed files."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from sapo_gym.webshop.catalog import CatalogError, build_catalog, parse_pricing
from sapo_gym.webshop.dataset import find_files, load_catalog
from sapo_gym.webshop.generate import PRODUCT_TYPES, generate_raw


def _write(folder: Path, products: object, ins: object, human: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, blob in (
        ("items_shuffle_1000.json", products),
        ("items_ins_v2_1000.json", ins),
        ("items_human_ins.json", human),
    ):
        (folder / name).write_text(json.dumps(blob))
    return folder


def test_generator_is_deterministic_and_in_webshop_schema() -> None:
    a, b = generate_raw(300, seed=1), generate_raw(300, seed=1)
    assert a == b and a != generate_raw(300, seed=2)
    products, ins, human = a
    assert len({p["asin"] for p in products}) == 300
    keys = {
        "asin",
        "name",
        "full_description",
        "small_description",
        "pricing",
        "customization_options",
        "images",
        "query",
        "category",
        "product_category",
    }
    assert all(keys <= set(p) for p in products)
    assert {p["category"] for p in products} == {t.category for t in PRODUCT_TYPES}
    some = human[products[0]["asin"]][0]
    assert set(some) == {"instruction", "instruction_attributes", "instruction_options"}
    assert set(ins[products[0]["asin"]]) == {"attributes", "instruction", "instruction_attributes"}


def test_default_catalog_size_goals_and_splits() -> None:
    catalog = load_catalog()
    assert len(catalog.products) == 1000 and len(catalog.goals) == 2000
    assert len(catalog.goal_indices("test")) == 500 and len(catalog.goal_indices("train")) == 1500
    assert all(g.price_upper > catalog.prices[g.asin] for g in catalog.goals)
    assert all(g.instruction_text.endswith("dollars") for g in catalog.goals if g.price_upper < 1_000_000)
    with pytest.raises(ValueError, match=r"valid choices: \['test', 'train', 'verl-agent-test', 'verl-agent-train'\]"):
        catalog.goal_indices("valid")
    with pytest.raises(ValueError, match="needs the synthetic goals with seed 1000"):
        catalog.goal_indices("verl-agent-test")


def test_goal_shuffle_is_identical_across_processes() -> None:
    code = (
        "import hashlib; from sapo_gym.webshop.dataset import load_catalog; c = load_catalog(); "
        "print(hashlib.sha256(repr([(g.asin, g.instruction_text, g.price_upper) for g in c.goals]).encode()).hexdigest())"
    )
    runs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": seed}
        ).stdout
        for seed in ("1", "2")
    }
    assert len(runs) == 1


def test_raw_files_roundtrip_and_real_file_names(tmp_path: Path) -> None:
    products, ins, human = generate_raw(50, seed=3)
    folder = _write(tmp_path / "d", products, ins, human)
    files = find_files(folder)
    assert files.products.name == "items_shuffle_1000.json" and files.human is not None
    catalog = load_catalog(folder)
    assert len(catalog.products) == 50 and catalog.source == str(folder.resolve())
    assert catalog.digest == build_catalog(products, ins, human, source="x").digest
    synthetic = load_catalog(folder, human_goals=False)
    n_combos = sum(len(list(itertools.product(*p.options.values()))) for p in synthetic.products)
    assert len(synthetic.goals) == n_combos  # one synthetic goal per option combination


def test_pricing_is_parsed_as_webshop_does() -> None:
    assert parse_pricing("$12.99") == ((12.99,), "$12.99")
    assert parse_pricing("$10.99 - $15.50") == ((10.99, 15.5), "$10.99 to $15.5")
    assert parse_pricing("") == ((100.0,), "$100.0")
    with pytest.raises(CatalogError, match="pricing"):
        parse_pricing("twelve dollars", "items_shuffle.json", "#0")


@pytest.mark.parametrize(
    "mutate, file, field",
    [
        (lambda p, i, h: p[0].pop("name"), "items_shuffle_1000.json", "'name'"),
        (lambda p, i, h: p[0].update(category=7), "items_shuffle_1000.json", "'category'"),
        (
            lambda p, i, h: p[1].update(customization_options={"color": "red"}),
            "items_shuffle_1000.json",
            "customization_options.color",
        ),
        (
            lambda p, i, h: h[p[0]["asin"]][0].pop("instruction_attributes"),
            "items_human_ins.json",
            "'instruction_attributes'",
        ),
    ],
)
def test_malformed_files_name_the_file_and_field(tmp_path: Path, mutate, file: str, field: str) -> None:
    products, ins, human = generate_raw(5, seed=4)
    mutate(products, ins, human)
    folder = _write(tmp_path / "bad", products, ins, human)
    with pytest.raises(CatalogError) as err:
        load_catalog(folder)
    assert file in str(err.value) and field in str(err.value)


def test_not_json_and_missing_files(tmp_path: Path) -> None:
    folder = _write(tmp_path / "j", [], {}, {})
    (folder / "items_ins_v2_1000.json").write_text("{not json")
    with pytest.raises(CatalogError, match="items_ins_v2_1000.json.*not valid JSON"):
        load_catalog(folder)
    with pytest.raises(FileNotFoundError, match="items_shuffle"):
        load_catalog(tmp_path / "j" / "..")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_catalog(tmp_path / "nowhere")
