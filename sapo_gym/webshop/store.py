"""WebShop's product files parsed once into a disk cache that every process reads, one copy in the page cache.

WebShop's full set is 1.18 M products in gigabytes of JSON: read whole, as Python objects, it takes many times
its size in memory in every process. :func:`open_store` instead streams the product and instruction files once
(:mod:`.jsonstream`), adapts each product with the loader's own :func:`~.catalog.product_from_raw` (the same
filters: asin ``nan`` or longer than 10 characters, repeats), and writes a folder of flat files under
``$SAPO_GYM_CACHE/webshop`` keyed by the sha256 of the two files (remembered per path, size and mtime, so it
is computed once per file) and ``num_products``:

* ``records.bin`` + ``offsets.npy``: each product as compact JSON (its :class:`~.catalog.Product` fields and its
  ``items_ins_v2`` instruction and instruction attributes), decoded on access, the last 4,096 kept per process;
* ``asins.npy`` (10-byte strings when every asin is ASCII; ``sorted_asins.npy`` / ``asin_order.npy`` for
  lookups), ``price_low.npy`` with ``ranged.npy`` / ``ranged_high.npy`` (the products with a price range and
  its top), ``titles.bin`` + ``title_offsets.npy``, and per product the number of option combinations and
  whether it has a synthetic instruction, and its synthetic-goal weight (WebShop's rule, seed-independent).

It is built in a temporary folder and renamed into place (parallel builders never expose half a store; a
read-only cache gets a temporary folder). Nothing is mapped (:mod:`.mapped`): records, titles, asins, weights and
offsets are read with ``pread`` an item at a time, the sorted asins searched through a sample of them held in
memory, and the arrays a computation reads whole (prices, ranges, combinations: :meth:`ProductStore.array`) are
read into the process's memory for that computation only. :mod:`.store_goals` makes the catalog (prices, goals)
over it.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import logging
import math
import os
import shutil
import tempfile
from array import array
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from sapo_gym.webshop.catalog import CatalogError, Product, product_from_raw
from sapo_gym.webshop.jsonstream import iter_array, iter_object
from sapo_gym.webshop.mapped import PROGRESS_EVERY, ArrayFile, FileBytes, SortedFile

__all__ = ["STORE_FORMAT", "ProductStore", "open_store", "files_digest", "StoreProducts", "StoreAsins", "StoreByAsin"]

STORE_FORMAT = "store2"
"""Names the layout in the cache key (change it when the layout or the adaptation changes)."""
DECODED_PRODUCTS = 4096
_HASH_BLOCK = 1 << 22

log = logging.getLogger(__name__)


def _cache() -> Path:
    from sapo_gym.webshop.search import cache_root

    return cache_root() / "webshop"


def _write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes, remembered under the cache by its path, size, mtime and inode."""
    st = path.stat()
    stamp = hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}".encode()).hexdigest()[:32]
    memo = _cache() / "file-digests" / stamp
    if memo.is_file():
        return memo.read_text().strip()
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(functools.partial(fh.read, _HASH_BLOCK), b""):
            digest.update(block)
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        _write_atomically(memo, digest.hexdigest())
    except OSError:  # a read-only cache: hashed again next time
        pass
    return digest.hexdigest()


def files_digest(paths: Sequence[Path]) -> str:
    return hashlib.sha256("|".join(file_digest(p) for p in paths).encode()).hexdigest()[:20]


def open_store(products: Path, instructions: Path, num_products: int | None = None) -> ProductStore:
    """The store of these files (the first ``num_products`` records of the product file), built if missing."""
    content = f"{files_digest([products, instructions])}-{num_products if num_products else 'all'}"
    folder = _cache() / f"{STORE_FORMAT}-{content}"
    if not (folder / "meta.json").is_file():
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
        except OSError:  # a read-only cache
            tmp = Path(tempfile.mkdtemp(prefix="sapo-store-"))
            _build(products, instructions, num_products, tmp, content)
            return ProductStore(tmp)  # read from the temporary folder, left in place
        try:
            _build(products, instructions, num_products, tmp, content)
            os.replace(tmp, folder)
        except OSError:  # another worker's identical store landed first
            pass
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return ProductStore(folder)


def _instructions(path: Path) -> dict[str, bytes]:
    """``items_ins_v2``'s entries as compact JSON bytes by asin (decoded as each product is met)."""
    return {asin: json.dumps(entry, separators=(",", ":")).encode() for asin, entry in iter_object(path)}


def _build(products: Path, instructions: Path, num_products: int | None, out: Path, content: str) -> None:
    ins = _instructions(instructions)
    writer = _Writer(out)
    seen: set[str] = set()
    records = iter_array(products)
    with open(out / "records.bin", "wb") as writer.records, open(out / "titles.bin", "wb") as writer.titles:
        for i, raw in enumerate(itertools.islice(records, num_products) if num_products else records):
            if i and i % PROGRESS_EVERY == 0:
                log.info("product store: %d records read", i)
            asin = raw.get("asin") if isinstance(raw, dict) else None
            if asin in seen or asin == "nan" or (isinstance(asin, str) and len(asin) > 10):
                continue
            entry = json.loads(ins[asin]) if isinstance(asin, str) and asin in ins else None
            attrs = (entry or {}).get("attributes", []) if isinstance(asin, str) else []
            writer.add(product_from_raw(raw, attrs, products.name, i), entry, instructions.name)
            seen.add(asin)
    del ins, seen
    writer.finish(
        products_digest=hashlib.sha256(f"{content}|products".encode()).hexdigest()[:20],
        files=[products.name, instructions.name],
        num_products=num_products,
    )


class _Writer:
    """Appends products to the store's files (``records`` and ``titles``, opened by the caller); :meth:`finish`
    writes the arrays and the weights."""

    records: BinaryIO
    titles: BinaryIO

    def __init__(self, out: Path):
        self.out = out
        self.offsets, self.title_offsets = array("q", [0]), array("q", [0])
        self.asins: list[str] = []
        self.low, self.high = array("d"), array("d")
        self.combos = array("q")
        self.instructed = bytearray()
        self.ins_attrs: list[list[str] | None] = []

    def add(self, p: Product, entry: Any, ins_file: str) -> None:
        instruction = entry.get("instruction") if isinstance(entry, dict) else None
        ins_attrs = None
        if instruction is not None:  # what WebShop's synthetic goals read, checked here
            if not isinstance(instruction, str):
                raise CatalogError(
                    ins_file, p.asin, "instruction", f"expected a string, got {type(instruction).__name__}"
                )
            ins_attrs = entry.get("instruction_attributes")
            if not isinstance(ins_attrs, list):
                raise CatalogError(ins_file, p.asin, "instruction_attributes", "expected a list")
        record = [
            p.asin,
            p.title,
            p.category,
            p.query,
            p.product_category,
            list(p.pricing),
            p.price_tag,
            p.options,
            p.attributes,
            p.bullet_points,
            p.description,
            instruction,
            ins_attrs,
        ]
        self.offsets.append(self.offsets[-1] + self.records.write(json.dumps(record, separators=(",", ":")).encode()))
        self.title_offsets.append(self.title_offsets[-1] + self.titles.write(p.title.encode()))
        self.asins.append(p.asin)
        self.low.append(p.pricing[0])
        self.high.append(p.pricing[1] if len(p.pricing) > 1 else math.nan)
        self.combos.append(math.prod(len(v) for v in p.options.values()) if instruction is not None else 0)
        self.instructed.append(instruction is not None)  # a bool is 0 or 1
        self.ins_attrs.append(ins_attrs)

    def finish(self, **meta: Any) -> None:
        asins = np.array(self.asins, dtype="S10" if all(a.isascii() for a in self.asins) else "U10")
        order = np.argsort(asins, kind="stable")
        high = np.array(self.high, dtype=np.float64)
        ranged = np.flatnonzero(~np.isnan(high))
        arrays = {
            "offsets": np.array(self.offsets, dtype=np.int64),
            "title_offsets": np.array(self.title_offsets, np.int64),
            "asins": asins,
            "sorted_asins": asins[order],
            "asin_order": order.astype(np.int32),
            "price_low": np.array(self.low, dtype=np.float64),
            "ranged": ranged,
            "ranged_high": high[ranged],
            "combos": np.array(self.combos, dtype=np.int64),
            "instructed": np.frombuffer(bytes(self.instructed), dtype=np.uint8).astype(bool),
            "weights": self._weights(),
        }
        for name, values in arrays.items():
            np.save(self.out / f"{name}.npy", values)
        (self.out / "meta.json").write_text(json.dumps({"format": STORE_FORMAT, "products": len(self.asins), **meta}))

    def _weights(self) -> np.ndarray:
        """WebShop's synthetic-goal weight per instructed product: each instruction attribute counted once per goal
        (option combination), a goal's weight the mean of ``1 / count`` over its attributes (NaN: no goal)."""
        counts: dict[str, int] = {}
        for attrs, combos in zip(self.ins_attrs, self.combos):
            for a in attrs or ():
                counts[a] = counts.get(a, 0) + combos
        weights = np.full(len(self.combos), math.nan)
        for i, (attrs, combos) in enumerate(zip(self.ins_attrs, self.combos)):
            if attrs is not None and combos:
                weights[i] = sum(1.0 / counts[a] for a in attrs) / max(len(attrs), 1)
        return weights


class ProductStore:
    """A built store, opened read-only (see the module docstring)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.meta = json.loads((folder / "meta.json").read_text())
        self.products_digest: str = self.meta["products_digest"]
        self.offsets, self.title_offsets = ArrayFile(folder / "offsets.npy"), ArrayFile(folder / "title_offsets.npy")
        self.asins, self.sorted_asins = ArrayFile(folder / "asins.npy"), SortedFile(folder / "sorted_asins.npy")
        self.asin_order, self.weights = ArrayFile(folder / "asin_order.npy"), ArrayFile(folder / "weights.npy")
        self._records, self._titles = FileBytes(folder / "records.bin"), FileBytes(folder / "titles.bin")
        self.product = functools.lru_cache(maxsize=DECODED_PRODUCTS)(self._product)
        self.index = functools.lru_cache(maxsize=1 << 16)(self._index)

    def __len__(self) -> int:
        return len(self.asins)

    def array(self, name: str) -> np.ndarray:
        """The whole per-product array ``name`` (``price_low``, ``ranged``, ``ranged_high``, ``combos``,
        ``instructed``), read into this process's memory: for a computation that reads most of it, then drops it."""
        return np.load(self.folder / f"{name}.npy")

    def record(self, i: int) -> list[Any]:
        return json.loads(self._records.read(*self.offsets.span(i)))

    def _product(self, i: int) -> Product:
        (asin, title, category, query, breadcrumb, pricing, tag, options, attributes, bullets, description, *_) = (
            self.record(i)
        )
        return Product(
            asin=asin,
            title=title,
            category=category,
            query=query,
            product_category=breadcrumb,
            pricing=tuple(pricing),
            price_tag=tag,
            options=options,
            attributes=attributes,
            bullet_points=bullets,
            description=description,
        )

    def instruction(self, i: int) -> tuple[str | None, list[str] | None]:
        """The product's ``items_ins_v2`` instruction and instruction attributes (None, None without one)."""
        return tuple(self.record(i)[-2:])  # type: ignore[return-value]

    def _index(self, asin: str) -> int | None:
        """The catalog position of ``asin`` (None when the store has no such product)."""
        if not isinstance(asin, str) or len(asin) > 10:
            return None
        if self.asins.dtype.kind == "S":  # ASCII asins, stored as bytes
            if not asin.isascii():
                return None
            key: str | bytes = asin.encode()
        else:
            key = asin
        j = self.sorted_asins.searchsorted(key)
        return int(self.asin_order.item(j)) if j < len(self.sorted_asins) and self.sorted_asins.item(j) == key else None

    def asin(self, i: int) -> str:
        a = self.asins.item(i)
        return a.decode() if isinstance(a, bytes) else str(a)

    def title(self, i: int) -> str:
        return self._titles.read(*self.title_offsets.span(i)).decode()

    def titles(self) -> Iterator[str]:
        return (self.title(i) for i in range(len(self)))

    def iter_products(self) -> Iterator[Product]:
        """Every product in catalog order, decoded one at a time (without filling the per-process cache)."""
        return (self._product(i) for i in range(len(self)))


class StoreProducts(Sequence[Product]):
    """The store's products as a read-only sequence (decoded on access)."""

    def __init__(self, store: ProductStore):
        self.store = store

    def __len__(self) -> int:
        return len(self.store)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self.store.product(j) for j in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        return self.store.product(i % len(self))

    def __iter__(self) -> Iterator[Product]:
        return self.store.iter_products()


class StoreAsins(Sequence[str]):
    """The store's asins in catalog order."""

    def __init__(self, store: ProductStore):
        self.store = store

    def __len__(self) -> int:
        return len(self.store)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self.store.asin(j) for j in range(*i.indices(len(self)))]
        return self.store.asin(i)


class StoreByAsin(Mapping[str, Product]):
    """asin → product over the store."""

    def __init__(self, store: ProductStore):
        self.store = store

    def __getitem__(self, asin: str) -> Product:
        i = self.store.index(asin)
        if i is None:
            raise KeyError(asin)
        return self.store.product(i)

    def __contains__(self, asin: object) -> bool:
        return isinstance(asin, str) and self.store.index(asin) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(StoreAsins(self.store))

    def __len__(self) -> int:
        return len(self.store)
