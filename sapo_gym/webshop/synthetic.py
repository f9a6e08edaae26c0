"""A WebShop-format catalog of any size (1.18 M products by default), streamed to disk: the full path, measurable.

    python -m sapo_gym.webshop.synthetic --products 1181436 --out DIR [--seed 0] [--names full|1k]

writes ``items_shuffle.json``, ``items_ins_v2.json`` and ``items_human_ins.json`` (with ``--names 1k`` the
``_1000`` names) in the schema of WebShop's own files, so ``catalog="full"`` reads them through exactly the
code path the real files take. It is for measuring (``benchmarks/webshop_scale.py``), not for playing: the
embedded catalog (:mod:`.generate`) is the one the boards use.

The schema (WebShop's ``engine.load_products`` and ``goal.py``): ``items_shuffle.json`` is a list of products
with ``asin``, ``name``, ``full_description``, ``small_description`` (a list of bullet points, now and then a
single string), ``pricing`` (``"$12.99"``, ``"$10.99 - $15.99"``, or empty for WebShop's $100), ``images``,
``query``, ``category``, ``product_category`` (a ``›`` breadcrumb), ``customization_options`` (option name →
``[{"value", "image"}]``, values with ``/`` that the loader turns into `` | ``) and the scraped keys the loader
drops (``product_information``, ``brand``, ``list_price``, ``total_reviews``, ...); ``items_ins_v2.json`` maps
an asin to its mined ``attributes`` and, for most products, a synthetic ``instruction`` with its
``instruction_attributes``; ``items_human_ins.json`` maps an asin to human-style instructions
(``instruction``, ``instruction_attributes``, ``instruction_options``, ``assignment_id``, ``worker_id``).

The statistics are chosen to be like the published ones (1,181,436 products in five categories, about 12 k
human instructions, some 7 synthetic goals per instructed product as the 1k pair's 6,910 goals): 2-8
attributes per product; no option for about a third of the products, one to three option names otherwise with
1-30 values each; log-normal prices around $20 with a quarter of them ranges; titles of 6-25 words with a brand
and often a model code (so the vocabulary grows with the catalog, as real product codes make it), descriptions
of 30-250 words drawn from a Zipf-weighted lexicon, 3-7 bullet points. They are not measured from the real
files, which are not available here. Each product is drawn from its own generator (seed, index), so a smaller
catalog is a prefix of a larger one; products 0-999 and every 250th after carry two human instructions.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import math
import os
import random
from pathlib import Path
from typing import Any, TextIO

from sapo_gym.webshop.generate import _asin

__all__ = ["FULL_PRODUCTS", "CATEGORIES", "synthetic_product", "write_catalog", "main"]

FULL_PRODUCTS = 1_181_436
"""The number of products of WebShop's full ``items_shuffle.json`` (its paper's 1.18 M)."""
HUMAN_STRIDE = 250
"""Products 0-999 and every this-many-th after carry human instructions (about 12 k instructions at full size)."""

CATEGORIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "beauty": (
        "Beauty & Personal Care",
        (
            "face serum",
            "toner",
            "cleanser",
            "mascara",
            "eyeliner",
            "conditioner",
            "hair dryer",
            "perfume",
            "body lotion",
            "sunscreen",
            "face mask",
            "lip balm",
            "nail polish",
            "razor",
            "hair oil",
            "body scrub",
            "foundation",
            "concealer",
            "blush",
            "eyeshadow palette",
            "setting spray",
            "hair clip",
            "wig",
            "bath bomb",
            "shampoo",
        ),
    ),
    "electronics": (
        "Electronics",
        (
            "earbuds",
            "headphones",
            "phone case",
            "charger",
            "hdmi cable",
            "speaker",
            "power bank",
            "memory card",
            "keyboard",
            "mouse",
            "webcam",
            "monitor",
            "tablet stand",
            "usb hub",
            "router",
            "smart watch",
            "dash cam",
            "microphone",
            "projector",
            "screen protector",
            "laptop sleeve",
            "car mount",
            "ring light",
            "remote",
            "tripod",
        ),
    ),
    "fashion": (
        "Clothing, Shoes & Jewelry",
        (
            "t-shirt",
            "hoodie",
            "jeans",
            "leggings",
            "running shoes",
            "sneakers",
            "dress",
            "jacket",
            "socks",
            "boots",
            "sandals",
            "belt",
            "backpack",
            "necklace",
            "earrings",
            "sweater",
            "shorts",
            "blouse",
            "pajama set",
            "swimsuit",
            "hat",
            "scarf",
            "gloves",
            "watch band",
            "wallet",
        ),
    ),
    "food": (
        "Grocery & Gourmet Food",
        (
            "green tea",
            "coffee beans",
            "protein bars",
            "olive oil",
            "trail mix",
            "dark chocolate",
            "honey",
            "granola",
            "hot sauce",
            "pasta",
            "rice",
            "almonds",
            "beef jerky",
            "cookies",
            "popcorn",
            "maple syrup",
            "sea salt",
            "spice set",
            "energy drink",
            "candy",
            "crackers",
            "peanut butter",
            "oatmeal",
            "dried fruit",
            "soup mix",
        ),
    ),
    "furniture": (
        "Home & Kitchen",
        (
            "office chair",
            "bookshelf",
            "area rug",
            "coffee table",
            "bed sheets",
            "floor lamp",
            "nightstand",
            "sofa",
            "dining chair",
            "tv stand",
            "desk",
            "shoe rack",
            "bar stool",
            "mattress topper",
            "curtains",
            "throw pillow",
            "wall shelf",
            "storage bench",
            "ottoman",
            "dresser",
            "bed frame",
            "side table",
            "mirror",
            "blanket",
            "recliner",
        ),
    ),
}
"""Category → (breadcrumb root, product nouns): WebShop's five categories."""
_MODIFIERS = ("", "men's", "women's", "kids", "premium", "organic", "wireless", "portable", "large", "mini")
_ATTRIBUTES = (
    "long lasting",
    "easy to use",
    "high quality",
    "non slip",
    "water resistant",
    "machine wash",
    "gluten free",
    "cruelty free",
    "paraben free",
    "fast charging",
    "noise cancelling",
    "easy assemble",
    "solid wood",
    "heavy duty",
    "lightweight",
    "breathable",
    "soft material",
    "stainless steel",
    "low sugar",
    "non gmo",
    "travel size",
    "dry skin",
    "sensitive skin",
    "natural ingredients",
    "long battery life",
    "high speed",
    "slim fit",
    "button closure",
    "elastic waist",
    "memory foam",
    "living room",
    "space saving",
    "storage space",
    "bpa free",
    "dishwasher safe",
    "easy clean",
    "quick release",
    "hands free",
    "plant based",
    "individually wrapped",
    "high protein",
    "wireless charging",
    "4k ultra hd",
    "usb c",
    "anti slip",
    "daily wear",
    "gift set",
    "hair growth",
    "fine mist",
    "dark circles",
    "leak proof",
    "fair trade",
    "keto friendly",
    "machine washable",
)
_COLOURS = (
    "black",
    "white",
    "navy blue",
    "grey",
    "red",
    "green",
    "beige",
    "pink",
    "brown",
    "purple",
    "rose gold",
    "silver",
    "heather grey",
    "light blue",
    "dark green",
    "khaki",
    "burgundy",
    "teal",
    "coral",
    "ivory",
    "charcoal",
    "mint",
    "mustard",
    "olive",
    "lavender",
    "wine red",
    "sky blue",
    "black/white",
    "blue/grey",
    "multicolor",
)
_SIZES = {
    "beauty": ("0.5 fl oz", "1 fl oz", "1.7 fl oz (pack of 1)", "3.4 fl oz", "6.8 fl oz", "16.9 fl oz (pack of 2)"),
    "electronics": ("32gb", "64gb", "128gb", "256gb", "1tb", "3 ft", "6 ft", "10 ft", "pack of 2"),
    "fashion": (
        "x-small",
        "small",
        "medium",
        "large",
        "x-large",
        "xx-large",
        "3x-large",
        "6",
        "7",
        "7.5",
        "8",
        "8.5",
        "9",
        "10",
        "11",
        "12",
        "13",
        "28w x 30l",
        "32w x 32l",
        "one size",
    ),
    "food": ("4 ounce (pack of 1)", "8 ounce", "12 ounce (pack of 6)", "1 pound", "2 pound (pack of 2)", "24 count"),
    "furniture": ("twin", "full", "queen", "king", "24 x 36 inch", "5 x 7 feet", "8 x 10 feet", "2-pack", "set of 4"),
}
_OPTION_NAMES = ("style", "pattern name", "flavor name", "scent", "material type", "item package quantity")
_INSTRUCTIONS = (
    "i am looking for {a} {noun}{o}",
    "i need {a} {noun}{o}",
    "find me {a} {noun}{o}",
    "i want to buy {a} {noun}{o}",
    "i'm looking for a {noun} that is {a}{o}",
)


@functools.cache
def _lexicon() -> tuple[tuple[str, ...], list[float]]:
    """20,000 pronounceable filler words and their Zipf-Mandelbrot cumulative weights (rank r: 1 / (r + 20)^1.07)."""
    rng = random.Random(20220702)
    onsets, vowels, codas = (
        "b c d f g h j k l m n p r s t v w z br cl st tr pl gr sh ch".split(),
        "aeiou",
        ["", "n", "r", "s", "l", "t", "m"],
    )
    words: dict[str, None] = {}
    while len(words) < 20_000:
        word = "".join(rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas) for _ in range(rng.randint(1, 3)))
        words.setdefault(word, None)
    return tuple(words), list(itertools.accumulate(1.0 / (r + 20) ** 1.07 for r in range(len(words))))


def _words(rng: random.Random, k: int) -> list[str]:
    words, weights = _lexicon()
    return rng.choices(words, cum_weights=weights, k=k)


def _brand(rng: random.Random) -> str:
    words, _ = _lexicon()
    return words[int(len(words) * rng.random() ** 2)].capitalize()  # a few brands are common, most are rare


def _model_code(rng: random.Random) -> str:
    letters = "".join(rng.choice("ABCDEFGHJKLMNPRSTVWXYZ") for _ in range(rng.randint(1, 3)))
    return f"{letters}{rng.randint(10, 99999)}{rng.choice(('', '', 'B', 'X', '-PRO'))}"


def _price(rng: random.Random) -> str:
    if rng.random() < 0.01:
        return ""
    low = round(min(max(math.exp(rng.gauss(math.log(20.0), 0.9)), 0.5), 2000.0), 2)
    if rng.random() < 0.25:
        return f"${low:.2f} - ${round(low * rng.uniform(1.1, 2.5), 2):.2f}"
    return f"${low:.2f}"


def _options(rng: random.Random, category: str) -> dict[str, list[str]]:
    """0-3 option names (none for about a third of the products), 1-30 values each, in the raw file's spelling."""
    n_names = rng.choices((0, 1, 2, 3), weights=(35, 35, 25, 5))[0]
    pools = [("color", _COLOURS), ("size", _SIZES[category])]
    pools.append((rng.choice(_OPTION_NAMES), tuple(" ".join(_words(rng, 2)) for _ in range(12))))
    options = {}
    for name, pool in pools[:n_names]:
        count = min(len(pool), 1 + int(rng.expovariate(1 / 3)))
        options[name.capitalize() if rng.random() < 0.1 else name] = sorted(rng.sample(pool, count), key=pool.index)
    return options


def _title(rng: random.Random, noun: str, attrs: list[str]) -> str:
    words = [_brand(rng), *(a.title() for a in attrs[: rng.randint(0, 2)]), noun.title()]
    if rng.random() < 0.5:
        words.append(_model_code(rng))
    words += [w.capitalize() for w in _words(rng, rng.randint(4, 14))]
    return " ".join(words[:25])


def _text(rng: random.Random, noun: str, attrs: list[str], n_words: int) -> str:
    words = _words(rng, n_words)
    for phrase in (noun, *attrs):
        if rng.random() < 0.7:
            words.insert(rng.randrange(len(words) + 1), phrase)
    return " ".join(words).capitalize() + "."


def synthetic_product(seed: int, index: int) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """(the ``items_shuffle`` record, the ``items_ins_v2`` entry, the human instructions) of product ``index``."""
    rng = random.Random(seed * 7_919_000_003 + index)
    category = rng.choice(tuple(CATEGORIES))
    root, nouns = CATEGORIES[category]
    noun, modifier = rng.choice(nouns), rng.choice(_MODIFIERS)
    query = f"{modifier} {noun}".strip()
    attrs = rng.sample(_ATTRIBUTES, rng.randint(2, 8))
    options = _options(rng, category)
    asin = _asin(seed, index)
    bullets = [_text(rng, noun, [attrs[i % len(attrs)]], rng.randint(8, 30)) for i in range(rng.randint(3, 7))]
    raw = {
        "asin": asin,
        "name": _title(rng, query, attrs),
        "full_description": _text(rng, noun, attrs, rng.randint(30, 250)),
        "small_description": bullets[0] if rng.random() < 0.02 else bullets,
        "pricing": _price(rng),
        "images": [f"https://m.media-amazon.com/images/I/{asin}-{i}.jpg" for i in range(rng.randint(1, 7))],
        "query": query,
        "category": category,
        "product_category": f"{root} › {category.title()} › {noun.title()}s",
        "customization_options": {
            name: [{"value": v, "image": None} for v in values] for name, values in options.items()
        },
        "product_information": {
            "Brand": _brand(rng),
            "Item Weight": f"{rng.randint(1, 90)} ounces",
            "Date First Available": f"{rng.randint(1, 12)}/{rng.randint(1, 28)}/20{rng.randint(10, 21)}",
        },
        "brand": _brand(rng),
        "list_price": "",
        "total_reviews": rng.randint(0, 5000),
        "availability_status": "In Stock.",
        "seller_name": _brand(rng),
        "fulfilled_by_amazon": rng.random() < 0.5,
    }
    entry: dict[str, Any] = {"attributes": attrs}
    if rng.random() < 0.92:  # the rest have no synthetic instruction (no synthetic goal), as some of WebShop's
        named = rng.sample(attrs, rng.randint(1, min(3, len(attrs))))
        entry.update(instruction=_instruction(rng, named, query, {})[0], instruction_attributes=named)
    human = [] if index >= 1000 and index % HUMAN_STRIDE else [_human(rng, attrs, query, options) for _ in range(2)]
    return raw, entry, human


def _instruction(
    rng: random.Random, attrs: list[str], noun: str, options: dict[str, list[str]]
) -> tuple[str, list[str]]:
    chosen = {name.lower(): rng.choice(values) for name, values in options.items() if rng.random() < 0.8}
    said = "".join(f", {n}: {v}" if i else f" with {n}: {v}" for i, (n, v) in enumerate(chosen.items()))
    text = rng.choice(_INSTRUCTIONS).format(a=" and ".join(attrs), noun=noun, o=said)
    return text, list(chosen.values())


def _human(rng: random.Random, attrs: list[str], noun: str, options: dict[str, list[str]]) -> dict[str, Any]:
    named = rng.sample(attrs, rng.randint(1, min(3, len(attrs)))) if rng.random() < 0.98 else []
    text, values = _instruction(rng, named or attrs[:1], noun, options)
    return {
        "instruction": text,
        "instruction_attributes": named,
        "instruction_options": values,
        "assignment_id": f"3{rng.getrandbits(64):016X}",
        "worker_id": f"A{rng.getrandbits(40):010X}",
    }


FILE_NAMES = {
    "full": ("items_shuffle.json", "items_ins_v2.json", "items_human_ins.json"),
    "1k": ("items_shuffle_1000.json", "items_ins_v2_1000.json", "items_human_ins.json"),
}


class _JsonStream:
    """One JSON container written a member at a time (``[a, b]`` or ``{"k": v}``)."""

    def __init__(self, fh: TextIO, keyed: bool):
        self.fh, self.keyed, self.first = fh, keyed, True
        fh.write("{" if keyed else "[")

    def add(self, value: Any, key: str = "") -> None:
        self.fh.write(
            ("" if self.first else ",\n") + (json.dumps(key) + ": " if self.keyed else "") + json.dumps(value)
        )
        self.first = False

    def close(self) -> None:
        self.fh.write("}" if self.keyed else "]")


def write_catalog(out: str | Path, products: int = FULL_PRODUCTS, seed: int = 0, names: str = "full") -> dict[str, int]:
    """Stream a catalog of ``products`` products into ``out`` (each file written aside, then renamed into place).

    Returns counts: products, instructed products, human instructions, synthetic goals (option combinations of
    the instructed products) and bytes written."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / name for name in FILE_NAMES[names]]
    temps = [p.with_name(f".tmp-{os.getpid()}-{p.name}") for p in paths]
    counts = dict.fromkeys(("products", "instructed", "human", "synthetic_goals", "bytes"), 0)
    try:
        _write(temps, seed, products, counts)
        for temp, path in zip(temps, paths):
            counts["bytes"] += temp.stat().st_size
            os.replace(temp, path)
    finally:
        for temp in temps:
            temp.unlink(missing_ok=True)
    return counts


def _write(temps: list[Path], seed: int, n: int, counts: dict[str, int]) -> None:
    with (
        open(temps[0], "w", encoding="utf-8") as f_items,
        open(temps[1], "w", encoding="utf-8") as f_ins,
        open(temps[2], "w", encoding="utf-8") as f_human,
    ):
        items, ins, human = _JsonStream(f_items, False), _JsonStream(f_ins, True), _JsonStream(f_human, True)
        for i in range(n):
            raw, entry, instructions = synthetic_product(seed, i)
            items.add(raw)
            ins.add(entry, raw["asin"])
            if instructions:
                human.add(instructions, raw["asin"])
            _count(counts, raw, entry, instructions)
        for stream in (items, ins, human):
            stream.close()


def _count(counts: dict[str, int], raw: dict[str, Any], entry: dict[str, Any], human: list[dict[str, Any]]) -> None:
    counts["products"] += 1
    counts["human"] += len(human)
    if entry.get("instruction") is not None:
        counts["instructed"] += 1
        counts["synthetic_goals"] += math.prod(len(v) for v in raw["customization_options"].values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sapo_gym.webshop.synthetic", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--products", type=int, default=FULL_PRODUCTS, help=f"products to write (default {FULL_PRODUCTS:,})"
    )
    parser.add_argument("--out", required=True, help="the folder to write the three files into")
    parser.add_argument("--seed", type=int, default=0, help="the catalog's seed (default 0)")
    parser.add_argument(
        "--names",
        choices=tuple(FILE_NAMES),
        default="full",
        help="file names: the full pair's (default) or the 1k pair's",
    )
    args = parser.parse_args(argv)
    counts = write_catalog(args.out, args.products, args.seed, args.names)
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
