"""A deterministic generator of a WebShop catalog, in WebShop's own raw JSON schema.

The embedded default dataset: no download, no licence question. :func:`generate_raw` returns the
three structures WebShop reads from ``items_shuffle.json``, ``items_ins_v2.json`` and
``items_human_ins.json``, so the generated catalog goes through exactly the loader the real
files go through. Products cover WebShop's five categories (beauty, electronics, fashion, food,
furniture) over 30 product types; each has a search ``query``, a ``product_category``
breadcrumb, a price or a price range, colour/size-like options, attributes that appear in its
title, bullet points or description, and two human-style instructions naming some of its
attributes and options. Its synthetic instruction (``items_ins_v2``) names the attributes only,
as WebShop's do: the loader appends each synthetic goal's options (`` with color: grey, and size:
large``) and price cap to it. ``sapo-gym data webshop --generate DIR`` writes them to files.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

__all__ = ["ProductType", "PRODUCT_TYPES", "generate_raw"]


@dataclass(frozen=True)
class ProductType:
    """A family of products that share a search query and a breadcrumb."""

    category: str
    query: str
    breadcrumb: str
    noun: str
    """Noun phrase of the titles; contains the query's words."""
    attributes: tuple[str, ...]
    options: tuple[tuple[str, tuple[str, ...]], ...]
    price: tuple[float, float]


_COLOURS = ("black", "white", "navy blue", "grey", "red", "green", "beige", "pink", "brown", "purple")
_SIZES = ("small", "medium", "large", "x-large", "xx-large")
_PACKS = ("pack of 1", "pack of 2", "pack of 4", "pack of 6")
_VOLUMES = ("1.7 fl oz", "3.4 fl oz", "6.8 fl oz")
_DIMENSIONS = ("24 x 36 inch", "30 x 40 inch", "48 x 60 inch")
_STORAGE = ("64gb", "128gb", "256gb")

PRODUCT_TYPES: tuple[ProductType, ...] = (
    ProductType(
        "beauty",
        "face moisturizer",
        "Beauty & Personal Care › Skin Care › Face › Moisturizers",
        "Face Moisturizer",
        ("paraben free", "cruelty free", "sensitive skin", "long lasting", "hyaluronic acid"),
        (("size", _VOLUMES),),
        (8, 45),
    ),
    ProductType(
        "beauty",
        "hair shampoo",
        "Beauty & Personal Care › Hair Care › Shampoo & Conditioner › Shampoos",
        "Hair Shampoo",
        ("sulfate free", "natural ingredients", "dry hair", "argan oil", "color treated"),
        (("size", _VOLUMES),),
        (6, 30),
    ),
    ProductType(
        "beauty",
        "lipstick set",
        "Beauty & Personal Care › Makeup › Lips › Lipstick",
        "Lipstick Set",
        ("long lasting", "cruelty free", "matte finish", "easy carry", "high quality"),
        (("color", _COLOURS[4:8]),),
        (9, 35),
    ),
    ProductType(
        "beauty",
        "nail polish",
        "Beauty & Personal Care › Foot, Hand & Nail Care › Nail Polish",
        "Nail Polish",
        ("quick dry", "non toxic", "long lasting", "high gloss", "easy apply"),
        (("color", _COLOURS),),
        (5, 20),
    ),
    ProductType(
        "beauty",
        "makeup brush",
        "Beauty & Personal Care › Tools & Accessories › Makeup Brushes",
        "Makeup Brush Kit",
        ("synthetic hair", "easy clean", "travel case", "soft bristles", "high quality"),
        (("color", _COLOURS[:4]),),
        (7, 40),
    ),
    ProductType(
        "beauty",
        "body wash",
        "Beauty & Personal Care › Personal Care › Bath & Bathing Accessories › Body Washes",
        "Body Wash",
        ("natural ingredients", "dry skin", "paraben free", "fresh scent", "cruelty free"),
        (("size", _PACKS),),
        (5, 25),
    ),
    ProductType(
        "electronics",
        "wireless earbuds",
        "Electronics › Headphones, Earbuds & Accessories › Earbuds",
        "Wireless Earbuds",
        ("noise cancelling", "fast charging", "water resistant", "long battery life", "bluetooth 5.0"),
        (("color", _COLOURS[:3]),),
        (19, 120),
    ),
    ProductType(
        "electronics",
        "usb charger",
        "Electronics › Accessories & Supplies › Chargers & Adapters",
        "USB Wall Charger",
        ("fast charging", "dual port", "compact design", "overheat protection", "travel friendly"),
        (("size", _PACKS),),
        (8, 30),
    ),
    ProductType(
        "electronics",
        "hdmi cable",
        "Electronics › Accessories & Supplies › Audio & Video Accessories › HDMI Cables",
        "HDMI Cable",
        ("high speed", "gold plated", "braided nylon", "4k resolution", "ethernet support"),
        (("size", ("3 ft", "6 ft", "10 ft", "15 ft")),),
        (6, 25),
    ),
    ProductType(
        "electronics",
        "bluetooth speaker",
        "Electronics › Portable Audio & Video › Portable Speakers & Docks",
        "Bluetooth Speaker",
        ("water resistant", "long battery life", "deep bass", "built in microphone", "portable design"),
        (("color", _COLOURS[:6]),),
        (20, 150),
    ),
    ProductType(
        "electronics",
        "memory card",
        "Electronics › Computers & Accessories › Memory Cards › Micro SD Cards",
        "Memory Card",
        ("high speed", "water resistant", "shock proof", "4k video", "adapter included"),
        (("capacity", _STORAGE),),
        (9, 60),
    ),
    ProductType(
        "electronics",
        "phone case",
        "Cell Phones & Accessories › Cases, Holsters & Sleeves › Basic Cases",
        "Phone Case",
        ("shock absorbing", "slim fit", "wireless charging compatible", "raised edges", "anti scratch"),
        (("color", _COLOURS),),
        (7, 30),
    ),
    ProductType(
        "fashion",
        "men's running shoes",
        "Clothing, Shoes & Jewelry › Men › Shoes › Athletic › Running",
        "Men's Running Shoes",
        ("non slip", "breathable mesh", "rubber sole", "lightweight", "memory foam"),
        (("color", _COLOURS[:5]), ("size", ("8", "9", "10", "11", "12"))),
        (30, 110),
    ),
    ProductType(
        "fashion",
        "women's yoga pants",
        "Clothing, Shoes & Jewelry › Women › Clothing › Active › Leggings",
        "Women's Yoga Pants",
        ("high waist", "tummy control", "moisture wicking", "machine wash", "four way stretch"),
        (("color", _COLOURS[:6]), ("size", _SIZES)),
        (15, 45),
    ),
    ProductType(
        "fashion",
        "men's t-shirt",
        "Clothing, Shoes & Jewelry › Men › Clothing › Shirts › T-Shirts",
        "Men's T-Shirt",
        ("cotton", "short sleeve", "machine wash", "classic fit", "crew neck"),
        (("color", _COLOURS), ("size", _SIZES)),
        (9, 30),
    ),
    ProductType(
        "fashion",
        "women's rain jacket",
        "Clothing, Shoes & Jewelry › Women › Clothing › Coats, Jackets & Vests › Raincoats",
        "Women's Rain Jacket",
        ("waterproof", "hooded", "zipper closure", "lightweight", "packable"),
        (("color", _COLOURS[:6]), ("size", _SIZES)),
        (29, 90),
    ),
    ProductType(
        "fashion",
        "wool socks",
        "Clothing, Shoes & Jewelry › Men › Clothing › Socks › Casual Socks",
        "Wool Socks",
        ("merino wool", "moisture wicking", "cushioned sole", "machine wash", "warm"),
        (("color", _COLOURS[:4]), ("size", _PACKS)),
        (10, 35),
    ),
    ProductType(
        "fashion",
        "leather belt",
        "Clothing, Shoes & Jewelry › Men › Accessories › Belts",
        "Leather Belt",
        ("genuine leather", "alloy buckle", "adjustable", "gift box", "classic design"),
        (("color", ("black", "brown", "tan")), ("size", _SIZES[:4])),
        (12, 40),
    ),
    ProductType(
        "food",
        "green tea",
        "Grocery & Gourmet Food › Beverages › Tea › Green",
        "Green Tea Bags",
        ("organic", "caffeine free", "non gmo", "gluten free", "natural flavor"),
        (("size", _PACKS),),
        (5, 25),
    ),
    ProductType(
        "food",
        "protein bars",
        "Grocery & Gourmet Food › Snack Foods › Bars › Protein",
        "Protein Bars",
        ("gluten free", "high protein", "low sugar", "keto friendly", "plant based"),
        (("flavor", ("chocolate", "peanut butter", "vanilla", "berry")), ("size", _PACKS)),
        (10, 40),
    ),
    ProductType(
        "food",
        "coffee beans",
        "Grocery & Gourmet Food › Beverages › Coffee › Whole Coffee Beans",
        "Whole Coffee Beans",
        ("medium roast", "fair trade", "organic", "single origin", "dark roast"),
        (("size", ("12 oz", "2 lb", "5 lb")),),
        (9, 45),
    ),
    ProductType(
        "food",
        "olive oil",
        "Grocery & Gourmet Food › Pantry Staples › Cooking Oils › Olive",
        "Extra Virgin Olive Oil",
        ("cold pressed", "non gmo", "first harvest", "kosher", "glass bottle"),
        (("size", ("16.9 fl oz", "33.8 fl oz", "1 gallon")),),
        (8, 50),
    ),
    ProductType(
        "food",
        "trail mix",
        "Grocery & Gourmet Food › Snack Foods › Trail Mix",
        "Trail Mix Snack Packs",
        ("individually wrapped", "gluten free", "non gmo", "no artificial flavors", "high fiber"),
        (("size", _PACKS),),
        (6, 28),
    ),
    ProductType(
        "food",
        "dark chocolate",
        "Grocery & Gourmet Food › Candy & Chocolate › Chocolate Bars",
        "Dark Chocolate Bar",
        ("fair trade", "vegan", "low sugar", "organic", "gift box"),
        (("flavor", ("sea salt", "almond", "orange", "mint")),),
        (4, 30),
    ),
    ProductType(
        "furniture",
        "office chair",
        "Home & Kitchen › Furniture › Home Office Furniture › Home Office Chairs",
        "Office Chair",
        ("lumbar support", "adjustable height", "easy assemble", "mesh back", "heavy duty"),
        (("color", _COLOURS[:4]),),
        (60, 260),
    ),
    ProductType(
        "furniture",
        "bookshelf",
        "Home & Kitchen › Furniture › Home Office Furniture › Bookcases",
        "Bookshelf",
        ("solid wood", "easy assemble", "space saving", "storage space", "living room"),
        (("color", ("white", "black", "brown", "natural")),),
        (40, 190),
    ),
    ProductType(
        "furniture",
        "area rug",
        "Home & Kitchen › Home Décor Products › Area Rugs, Runners & Pads › Area Rugs",
        "Area Rug",
        ("non slip", "machine washable", "living room", "soft touch", "stain resistant"),
        (("color", _COLOURS[:6]), ("size", _DIMENSIONS)),
        (25, 160),
    ),
    ProductType(
        "furniture",
        "coffee table",
        "Home & Kitchen › Furniture › Living Room Furniture › Tables › Coffee Tables",
        "Coffee Table",
        ("solid wood", "storage space", "easy assemble", "living room", "metal frame"),
        (("color", ("white", "black", "brown", "grey")),),
        (50, 240),
    ),
    ProductType(
        "furniture",
        "bed sheets",
        "Home & Kitchen › Bedding › Sheets & Pillowcases › Sheet & Pillowcase Sets",
        "Bed Sheets Set",
        ("deep pocket", "machine wash", "breathable", "wrinkle free", "egyptian cotton"),
        (("color", _COLOURS), ("size", ("twin", "full", "queen", "king"))),
        (20, 90),
    ),
    ProductType(
        "furniture",
        "floor lamp",
        "Home & Kitchen › Lighting & Ceiling Fans › Lamps & Shades › Floor Lamps",
        "Floor Lamp",
        ("dimmable", "energy efficient", "living room", "easy assemble", "modern design"),
        (("color", ("black", "white", "gold", "silver")),),
        (30, 130),
    ),
)

_BRAND_PARTS = (
    "ver",
    "lum",
    "aro",
    "zen",
    "kai",
    "nor",
    "bel",
    "tro",
    "vix",
    "sol",
    "mar",
    "qua",
    "dex",
    "ori",
    "pla",
    "fen",
)
_INSTRUCTIONS = (
    "i am looking for {article} {attrs} {noun}{options}",
    "i need {article} {noun} that is {attrs}{options}",
    "find me {article} {attrs} {noun}{options}",
    "i want to buy {article} {noun} which is {attrs}{options}",
)


_BASE36 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _asin(seed: int, index: int) -> str:
    """Ten characters like Amazon's; a bijection of ``index`` (the multiplier is prime to 36**8), so unique."""
    n, digits = (index * 2654435761 + seed * 7919) % 36**8, []
    for _ in range(8):
        n, d = divmod(n, 36)
        digits.append(_BASE36[d])
    return "B0" + "".join(reversed(digits))


def _brand(rng: random.Random) -> str:
    return "".join(rng.sample(_BRAND_PARTS, 2)).capitalize()


def _price_text(rng: random.Random, low: float, high: float) -> str:
    a = round(rng.uniform(low, high), 2)
    if rng.random() < 0.25:
        return f"${a:.2f} - ${round(a * rng.uniform(1.1, 1.6), 2):.2f}"
    return f"${a:.2f}"


def _instruction(
    rng: random.Random, t: ProductType, attrs: list[str], options: dict[str, list[str]]
) -> tuple[dict[str, Any], str]:
    """A human-style instruction record (naming attributes and options) and its synthetic text (attributes only)."""
    chosen_attrs = rng.sample(attrs, rng.randint(1, min(2, len(attrs))))
    chosen_opts = {name: rng.choice(values) for name, values in options.items() if rng.random() < 0.85}
    opts = "".join(
        f", {name}: {value}" if i else f" with {name}: {value}" for i, (name, value) in enumerate(chosen_opts.items())
    )
    noun, template = t.noun.lower(), rng.choice(_INSTRUCTIONS)
    first_word = chosen_attrs[0] if template.index("{attrs}") < template.index("{noun}") else noun
    fields = dict(article="an" if first_word[0] in "aeiou" else "a", attrs=" and ".join(chosen_attrs), noun=noun)
    record = {
        "instruction": template.format(options=opts, **fields),
        "instruction_attributes": chosen_attrs,
        "instruction_options": list(chosen_opts.values()),
    }
    return record, template.format(options="", **fields)


def _product(rng: random.Random, t: ProductType, asin: str) -> tuple[dict[str, Any], list[str]]:
    attrs = rng.sample(t.attributes, rng.randint(3, 4))
    options = {
        name: sorted(rng.sample(values, rng.randint(min(2, len(values)), len(values))), key=values.index)
        for name, values in t.options
    }
    brand, model = _brand(rng), rng.randint(100, 999)
    title = f"{brand} {attrs[0].title()} {t.noun} {model}, {attrs[1].title()}"
    bullets = [
        f"{a.upper() if i == 0 else a.capitalize()}: designed for everyday use" for i, a in enumerate(attrs[1:3])
    ]
    bullets.append(f"What you get: one {t.noun.lower()} from {brand}, backed by a 30-day return window")
    description = (
        f"The {brand} {t.noun.lower()} {model}: {attrs[2]}, {attrs[-1]}. "
        f"A dependable choice in {t.breadcrumb.split(' › ')[-1].lower()}."
    )
    raw = {
        "asin": asin,
        "name": title,
        "full_description": description,
        "small_description": bullets,
        "pricing": _price_text(rng, *t.price),
        "category": t.category,
        "query": t.query,
        "product_category": t.breadcrumb,
        "images": [f"/static/img/{t.category}.svg"],
        "customization_options": {
            name: [{"value": v, "image": None} for v in values] for name, values in options.items()
        },
    }
    return raw, attrs


def generate_raw(
    num_products: int = 1000, seed: int = 0
) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """(items_shuffle, items_ins_v2, items_human_ins) for ``num_products`` products, deterministic in ``seed``."""
    rng = random.Random(seed)
    products, ins, human = [], {}, {}
    for i in range(num_products):
        t = PRODUCT_TYPES[rng.randrange(len(PRODUCT_TYPES))]
        asin = _asin(seed, i)
        raw, attrs = _product(rng, t, asin)
        options = {name: [c["value"] for c in values] for name, values in raw["customization_options"].items()}
        (first, synthetic), (second, _) = _instruction(rng, t, attrs, options), _instruction(rng, t, attrs, options)
        # the synthetic instruction names attributes only: the loader appends " with <name>: <value>, and ..." per goal
        ins[asin] = {
            "attributes": attrs,
            "instruction": synthetic,
            "instruction_attributes": first["instruction_attributes"],
        }
        human[asin] = [first, second]
        products.append(raw)
    return products, ins, human
