"""The WebShop-format catalog generator (``python -m sapo_gym.webshop.synthetic``): seeded, streamed, WebShop's schema."""

from __future__ import annotations

import json
import math
from pathlib import Path

from sapo_gym.webshop.catalog import build_catalog
from sapo_gym.webshop.synthetic import FILE_NAMES, HUMAN_STRIDE, main, synthetic_product, write_catalog

DROPPED_KEYS = {
    "product_information",
    "brand",
    "list_price",
    "total_reviews",
    "availability_status",
    "seller_name",
    "fulfilled_by_amazon",
}
"""Scraped keys of WebShop's items_shuffle.json that its loader's clean_product_keys drops."""


def _read(folder: Path, names: str = "full") -> tuple[list, dict, dict]:
    return tuple(json.loads((folder / name).read_text()) for name in FILE_NAMES[names])  # type: ignore[return-value]


def test_the_files_are_deterministic_and_a_smaller_catalog_is_a_prefix(tmp_path: Path) -> None:
    write_catalog(tmp_path / "a", 40, seed=3)
    write_catalog(tmp_path / "b", 40, seed=3)
    write_catalog(tmp_path / "c", 1010, seed=3)
    write_catalog(tmp_path / "d", 40, seed=4)
    for name in FILE_NAMES["full"]:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    (small, small_ins, small_human), (big, big_ins, big_human) = _read(tmp_path / "a"), _read(tmp_path / "c")
    assert big[:40] == small and all(big_ins[p["asin"]] == small_ins[p["asin"]] for p in small)
    assert {a: big_human[a] for a in small_human} == small_human
    assert _read(tmp_path / "d")[0] != small  # the seed matters
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == sorted(FILE_NAMES["full"])  # no temporary left


def test_records_have_webshops_schema_and_the_loader_reads_them(tmp_path: Path) -> None:
    counts = write_catalog(tmp_path, 1010, seed=0)
    products, ins, human = _read(tmp_path)
    assert counts["products"] == len(products) == 1010 and len({p["asin"] for p in products}) == 1010
    keys = {
        "asin",
        "name",
        "full_description",
        "small_description",
        "pricing",
        "images",
        "query",
        "category",
        "product_category",
        "customization_options",
    }
    assert all(keys | DROPPED_KEYS <= set(p) for p in products)
    assert {p["category"] for p in products} == {"beauty", "electronics", "fashion", "food", "furniture"}
    assert set(human) == {p["asin"] for i, p in enumerate(products) if i < 1000 or i % HUMAN_STRIDE == 0}
    assert all(
        set(h) == {"instruction", "instruction_attributes", "instruction_options", "assignment_id", "worker_id"}
        for entries in human.values()
        for h in entries
    )
    instructed = [p for p in products if ins[p["asin"]].get("instruction") is not None]
    assert counts["instructed"] == len(instructed) < len(products)  # some products have no synthetic instruction
    combos = sum(math.prod(len(v) for v in p["customization_options"].values()) for p in instructed)
    assert counts["synthetic_goals"] == combos
    catalog = build_catalog(products, ins, human, source="synthetic")  # WebShop's own loader, as for the 1k pair
    assert len(catalog.products) == 1010 and len(catalog.goals) == sum(
        1 for entries in human.values() for h in entries if h["instruction_attributes"]
    )
    synthetic = build_catalog(products, ins, human, source="synthetic", human_goals=False)
    assert len(synthetic.goals) == combos


def test_the_statistics_are_the_documented_ones() -> None:
    raws = [synthetic_product(0, i)[0] for i in range(3000)]
    # Proportions drawn with probability p over 3,000 products have a standard error of at most 0.9 points
    # (sqrt(0.25 / 3000)); each band is p +- 7 points, over 7 standard errors.
    n_options = [len(r["customization_options"]) for r in raws]
    assert 0.28 < n_options.count(0) / len(raws) < 0.42  # p = 0.35: no option for about a third
    assert max(n_options) == 3 and max(len(v) for r in raws for v in r["customization_options"].values()) <= 30
    ranges = [r for r in raws if " - " in r["pricing"]]
    assert 0.18 < len(ranges) / len(raws) < 0.32  # p = 0.25 of the 99 % with a price: a quarter are ranges
    words = sorted(len(r["name"].split()) for r in raws)
    assert words[0] >= 6 and words[-1] <= 25


def test_the_command_line_writes_the_pair_it_names(tmp_path: Path, capsys) -> None:
    assert main(["--products", "12", "--out", str(tmp_path), "--names", "1k", "--seed", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["products"] == 12
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(FILE_NAMES["1k"])
