"""Where the catalog comes from: the user's WebShop files, or the embedded generator.

``data_dir=`` (or ``$SAPO_WEBSHOP_DATA``) names a folder with WebShop's files; the full set
(``items_shuffle.json``, ``items_ins_v2.json``) is used when present, else the 1,000-product
set (``items_shuffle_1000.json``, ``items_ins_v2_1000.json``); human goals need
``items_human_ins.json``. Without a folder the catalog is generated (:mod:`.generate`).
Catalogs are cached per process, so the envs of a vector env share one.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from sapo_gym.webshop.catalog import Catalog, CatalogError, build_catalog, read_json
from sapo_gym.webshop.generate import generate_raw

__all__ = ["DATA_ENV", "DEFAULT_NUM_PRODUCTS", "WebShopFiles", "find_files", "load_catalog"]

DATA_ENV = "SAPO_WEBSHOP_DATA"
DEFAULT_NUM_PRODUCTS = 1000
HUMAN_FILE = "items_human_ins.json"


class WebShopFiles:
    """The files of a WebShop data folder that will be read."""

    def __init__(self, products: Path, instructions: Path, human: Path | None):
        self.products, self.instructions, self.human = products, instructions, human

    def __repr__(self) -> str:
        return f"WebShopFiles({self.products.name}, {self.instructions.name}, {self.human.name if self.human else None})"


def find_files(data_dir: str | Path) -> WebShopFiles:
    """Pick the product and instruction files in ``data_dir`` (full set first, then the 1k set)."""
    folder = Path(data_dir).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"WebShop data folder {folder} does not exist")
    for suffix in ("", "_1000"):
        products, ins = folder / f"items_shuffle{suffix}.json", folder / f"items_ins_v2{suffix}.json"
        if products.is_file() and ins.is_file():
            human = folder / HUMAN_FILE
            return WebShopFiles(products, ins, human if human.is_file() else None)
    raise FileNotFoundError(
        f"{folder}: expected items_shuffle.json + items_ins_v2.json or items_shuffle_1000.json + "
        "items_ins_v2_1000.json (run `sapo-gym data webshop` for where they come from)"
    )


def resolve_data_dir(data_dir: str | Path | None) -> Path | None:
    value = data_dir if data_dir is not None else os.environ.get(DATA_ENV)
    return Path(value).expanduser().resolve() if value else None


@functools.lru_cache(maxsize=4)
def _load(data_dir: Path | None, num_products: int | None, human_goals: bool, seed: int) -> Catalog:
    if data_dir is None:
        n = num_products or DEFAULT_NUM_PRODUCTS
        products, ins, human = generate_raw(n, seed)
        return build_catalog(products, ins, human, source=f"generated-{n}-seed{seed}", human_goals=human_goals)
    files = find_files(data_dir)
    if human_goals and files.human is None:
        raise FileNotFoundError(f"{data_dir}: human goals need {HUMAN_FILE} (or pass human_goals=False)")
    names = (files.products.name, files.instructions.name, HUMAN_FILE)
    return build_catalog(
        read_json(files.products), read_json(files.instructions), read_json(files.human) if human_goals and files.human else None,
        source=str(data_dir), human_goals=human_goals, num_products=num_products, files=names,
    )


def load_catalog(data_dir: str | Path | None = None, *, num_products: int | None = None, human_goals: bool = True,
                 seed: int = 0) -> Catalog:
    """The catalog for ``data_dir`` (else ``$SAPO_WEBSHOP_DATA``, else the generated one), cached per process."""
    try:
        return _load(resolve_data_dir(data_dir), num_products, human_goals, seed)
    except CatalogError:
        raise
    except (KeyError, TypeError, AttributeError) as exc:  # a shape no field check anticipated
        raise CatalogError(str(data_dir), "<unknown>", str(exc), "unexpected structure") from exc
