"""Where the catalog comes from: the user's WebShop files, or the embedded generator.

``data_dir=`` (or ``$SAPO_WEBSHOP_DATA``) names a folder with WebShop's files, and ``catalog=``
says which pair of them is read: ``"1k"`` (the default, as WebShop's ``web_agent_site/utils.py``
and verl-agent's ``use_small: True``) reads ``items_shuffle_1000.json`` + ``items_ins_v2_1000.json``,
``"full"`` reads ``items_shuffle.json`` + ``items_ins_v2.json`` (the 1.18M-product set). The choice
is explicit: a folder with both pairs (what verl-agent's ``setup.sh -d all`` leaves) still gives
the 1k pair unless ``catalog="full"``. Human goals need ``items_human_ins.json``. Without a
folder the catalog is generated (:mod:`.generate`) and the choice must stay ``"1k"``.
Catalogs are cached per process, so the envs of a vector env share one.

The two choices take two loaders. The 1k pair (and the generated catalog) is read whole into Python objects
(:func:`~.catalog.build_catalog`). The full pair goes through the product store (:mod:`.store`,
:mod:`.store_goals`): the files are parsed once, streaming, into a disk cache that every process reads,
and products and synthetic goals are decoded when read, so a process holds a bounded part of 1.18 M products.
Both give the same products, prices, goals, pages and rewards for the same files (a test plays both); the
dataset digest of a store catalog names the files' sha256, ``num_products``, the goal set and the seed instead
of hashing every goal's text.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from sapo_gym.webshop.catalog import SHUFFLE_SEED, Catalog, CatalogError, build_catalog, goal_split, read_json
from sapo_gym.webshop.generate import generate_raw
from sapo_gym.webshop.store import files_digest, open_store
from sapo_gym.webshop.store_goals import store_catalog

__all__ = [
    "DATA_ENV",
    "DEFAULT_NUM_PRODUCTS",
    "CATALOGS",
    "DEFAULT_CATALOG",
    "WebShopFiles",
    "find_files",
    "load_catalog",
    "load_split_catalog",
    "catalog_name",
]

DATA_ENV = "SAPO_WEBSHOP_DATA"
DEFAULT_NUM_PRODUCTS = 1000
HUMAN_FILE = "items_human_ins.json"
CATALOGS: dict[str, tuple[str, str]] = {
    "1k": ("items_shuffle_1000.json", "items_ins_v2_1000.json"),
    "full": ("items_shuffle.json", "items_ins_v2.json"),
}
"""The product and instruction files of each catalog choice."""
DEFAULT_CATALOG = "1k"


class WebShopFiles:
    """The files of a WebShop data folder that will be read."""

    def __init__(self, products: Path, instructions: Path, human: Path | None):
        self.products, self.instructions, self.human = products, instructions, human

    def __repr__(self) -> str:
        return (
            f"WebShopFiles({self.products.name}, {self.instructions.name}, {self.human.name if self.human else None})"
        )


def _check_choice(catalog: str) -> None:
    if catalog not in CATALOGS:
        raise ValueError(f"unknown catalog {catalog!r}; valid choices: {list(CATALOGS)}")


def find_files(data_dir: str | Path, catalog: str = DEFAULT_CATALOG) -> WebShopFiles:
    """The product and instruction files of ``catalog`` in ``data_dir`` (an error names what is missing)."""
    _check_choice(catalog)
    folder = Path(data_dir).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"WebShop data folder {folder} does not exist")
    products, ins = (folder / name for name in CATALOGS[catalog])
    if products.is_file() and ins.is_file():
        human = folder / HUMAN_FILE
        return WebShopFiles(products, ins, human if human.is_file() else None)
    present = [name for name, files in CATALOGS.items() if all((folder / f).is_file() for f in files)]
    hint = f"; it has the {present[0]!r} pair: pass catalog={present[0]!r}" if present else ""
    raise FileNotFoundError(
        f"{folder}: catalog={catalog!r} needs {' + '.join(CATALOGS[catalog])}{hint} "
        "(run `sapo-gym data webshop` for where they come from)"
    )


def resolve_data_dir(data_dir: str | Path | None) -> Path | None:
    value = data_dir if data_dir is not None else os.environ.get(DATA_ENV)
    return Path(value).expanduser().resolve() if value else None


def catalog_name(data_dir: str | Path | None, catalog: str = DEFAULT_CATALOG) -> str:
    """What the spec records: the choice (``1k`` / ``full``) for WebShop's files, ``generated`` without them."""
    _check_choice(catalog)
    return catalog if resolve_data_dir(data_dir) is not None else "generated"


@functools.lru_cache(maxsize=8)
def _load(
    data_dir: Path | None, num_products: int | None, human_goals: bool, seed: int, catalog: str, goal_seed: int
) -> Catalog:
    if data_dir is None:
        if catalog != DEFAULT_CATALOG:
            raise ValueError(f"catalog={catalog!r} reads WebShop's files: pass data_dir= or set {DATA_ENV}")
        n = num_products or DEFAULT_NUM_PRODUCTS
        products, ins, human = generate_raw(n, seed)
        return build_catalog(
            products, ins, human, source=f"generated-{n}-seed{seed}", human_goals=human_goals, goal_seed=goal_seed
        )
    files = find_files(data_dir, catalog)
    if human_goals and files.human is None:
        raise FileNotFoundError(f"{data_dir}: human goals need {HUMAN_FILE} (or a split of synthetic goals)")
    if catalog == "full":
        return _store_catalog(files, data_dir, num_products, human_goals, goal_seed)
    names = (files.products.name, files.instructions.name, HUMAN_FILE)
    return build_catalog(
        read_json(files.products),
        read_json(files.instructions),
        read_json(files.human) if human_goals and files.human else None,
        source=str(data_dir),
        human_goals=human_goals,
        num_products=num_products,
        goal_seed=goal_seed,
        files=names,
    )


def _store_catalog(
    files: WebShopFiles, data_dir: Path, num_products: int | None, human_goals: bool, goal_seed: int
) -> Catalog:
    """The full set through the product store: parsed once into a disk cache (:mod:`.store`)."""
    store = open_store(files.products, files.instructions, num_products)
    human = read_json(files.human) if human_goals and files.human else None
    if human_goals and not isinstance(human, dict):
        raise CatalogError(HUMAN_FILE, "<top>", "<root>", "expected an object keyed by asin")
    read = [files.products, files.instructions] + ([files.human] if human_goals and files.human else [])
    return store_catalog(
        store,
        human,
        human_goals=human_goals,
        goal_seed=goal_seed,
        source=str(data_dir),
        data_digest=f"{files_digest(read)}|{num_products}",
        human_file=HUMAN_FILE,
    )


def load_catalog(
    data_dir: str | Path | None = None,
    *,
    num_products: int | None = None,
    human_goals: bool = True,
    seed: int = 0,
    catalog: str = DEFAULT_CATALOG,
    goal_seed: int = SHUFFLE_SEED,
) -> Catalog:
    """The catalog for ``data_dir`` (else ``$SAPO_WEBSHOP_DATA``, else the generated one), cached per process.

    ``seed`` seeds the generator (generated catalogs only); ``goal_seed`` the prices, caps and goal shuffle.
    """
    _check_choice(catalog)
    try:
        return _load(resolve_data_dir(data_dir), num_products, human_goals, seed, catalog, goal_seed)
    except CatalogError:
        raise
    except (KeyError, TypeError, AttributeError) as exc:  # a shape no field check anticipated
        raise CatalogError(str(data_dir), "<unknown>", str(exc), "unexpected structure") from exc


def load_split_catalog(
    split: str,
    data_dir: str | Path | None = None,
    *,
    num_products: int | None = None,
    seed: int = 0,
    catalog: str = DEFAULT_CATALOG,
) -> Catalog:
    """The catalog holding the goals of the named ``split`` (its goal set and seed; see ``GOAL_SPLITS``)."""
    spec = goal_split(split)
    return load_catalog(
        data_dir,
        num_products=num_products,
        human_goals=spec.goals == "human",
        seed=seed,
        catalog=catalog,
        goal_seed=spec.seed,
    )
