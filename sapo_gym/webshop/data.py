"""``sapo-gym data webshop``: where WebShop's real files come from, validating them, preparing their caches,
writing the generated set.

Light at import (only argparse); the work happens inside :func:`run`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["register_data_cli", "run", "prepare", "SOURCES"]

SOURCES = """\
WebShop data (Yao et al., 2022; princeton-nlp/WebShop on GitHub). The product and instruction files
are distributed by the WebShop authors through the download links of their repository's setup.sh
(Google Drive); they are scraped from amazon.com and are for non-commercial research use only, so
sapo_gym does not ship or download them. To use them, fetch them yourself and point sapo_gym at
the folder with data_dir=... or SAPO_WEBSHOP_DATA=...:

  items_shuffle_1000.json, items_ins_v2_1000.json   the 1,000-product set: catalog="1k", the default
                                                    (WebShop's utils.py, verl-agent's use_small: True)
  items_shuffle.json, items_ins_v2.json             the full 1.18M-product set: catalog="full" (only when asked)
  items_human_ins.json                              human instructions (the test/train splits' goals)
  human_goals.json                                  optional: WebShop's baseline_models/data/human_goals.json,
                                                    the seed-233 goal order a needs_data test checks

Without a folder, sapo_gym uses a deterministic generated catalog of 1,000 products in the same
schema (`--generate DIR` writes it to files). To measure the full path without WebShop's files,
`python -m sapo_gym.webshop.synthetic --products 1181436 --out DIR` writes a catalog of that size in
their schema (synthetic text; see docs/webshop.md, The full catalog).

`--data-dir DIR` validates the files (it reads them, building the product store of catalog="full" if it is
not cached yet). `--data-dir DIR --catalog full --prepare` builds every cache an env of that catalog reads
(the product store, the synthetic splits' goals, the BM25 index, spaCy's noun table of the titles) under
$SAPO_GYM_CACHE (default ~/.cache/sapo_gym), once per machine and catalog, so no env builds them at run
time; an env that finds them missing builds them itself the first time."""


def register_data_cli(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "webshop",
        help="WebShop data: sources, validation, the generated catalog",
        description=SOURCES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--data-dir", default=None, help="validate the WebShop files in this folder (else $SAPO_WEBSHOP_DATA)"
    )
    p.add_argument(
        "--generate", metavar="DIR", default=None, help="write the generated catalog as WebShop files into DIR"
    )
    p.add_argument("--num-products", type=int, default=1000, help="products to generate (with --generate)")
    p.add_argument(
        "--catalog", default="1k", choices=["1k", "full"], help="which product files to validate or write (default 1k)"
    )
    p.add_argument("--synthetic-goals", action="store_true", help="validate with synthetic goals (verl-agent's splits)")
    p.add_argument(
        "--prepare",
        action="store_true",
        help="build every cache an env of --catalog over --data-dir reads (store, goals, BM25 index, noun "
        "table) under $SAPO_GYM_CACHE, with the time each took",
    )
    p.add_argument(
        "--noun-table",
        metavar="PATH",
        default=None,
        help="tag the embedded catalog's titles with spaCy (the nlp extra) and write the noun table the "
        "package ships (sapo_gym/webshop/nouns_generated.json.gz) to PATH",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json
    import os
    from pathlib import Path

    from sapo_gym.webshop.dataset import CATALOGS, DATA_ENV, HUMAN_FILE, find_files, load_split_catalog
    from sapo_gym.webshop.generate import generate_raw

    if args.noun_table:
        from sapo_gym.webshop.noun_table import write_shipped_table

        rule_id, n_titles, size = write_shipped_table(Path(args.noun_table))
        print(f"wrote the nouns of {n_titles} titles by {rule_id} to {args.noun_table} ({size} bytes)")
        return 0
    if args.generate:
        out = Path(args.generate)
        out.mkdir(parents=True, exist_ok=True)
        products, ins, human = generate_raw(args.num_products)
        names = (*CATALOGS[args.catalog], HUMAN_FILE)  # under the names --catalog reads (default: the 1k pair's)
        for name, blob in zip(names, (products, ins, human)):
            (out / name).write_text(json.dumps(blob))
        print(f"wrote {len(products)} generated products to {out}")
        return 0
    data_dir = args.data_dir or os.environ.get(DATA_ENV)
    if not data_dir:
        if args.prepare:
            raise ValueError(f"--prepare builds the caches of WebShop's files: pass --data-dir DIR or set {DATA_ENV}")
        print(SOURCES)
        return 0
    if args.prepare:
        return prepare(Path(data_dir).expanduser().resolve(), args.catalog)
    print(f"files: {find_files(data_dir, args.catalog)}")
    test_split, train_split = ("verl-agent-test", "verl-agent-train") if args.synthetic_goals else ("test", "train")
    catalog = load_split_catalog(test_split, data_dir, catalog=args.catalog)
    test, train = catalog.goal_indices(test_split), catalog.goal_indices(train_split)
    print(
        f"ok: {len(catalog.products)} products, {len(catalog.goals)} goals "
        f"(test {len(test)}, train {len(train)}), digest {catalog.digest}"
    )
    return 0


def prepare(data_dir: Path, catalog: str) -> int:
    """Build the caches of ``catalog`` over ``data_dir`` (:func:`.prepare.prepare_caches`), the builds' own progress
    lines shown on stderr."""
    import logging
    import sys

    from sapo_gym.webshop.prepare import prepare_caches
    from sapo_gym.webshop.search import cache_root

    print(
        f"preparing the caches of catalog={catalog!r} over {data_dir} in {cache_root() / 'webshop'} ($SAPO_GYM_CACHE)",
        flush=True,
    )
    logger, handler = logging.getLogger("sapo_gym.webshop"), logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("  %(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        steps = prepare_caches(data_dir, catalog, report=lambda line: print(line, flush=True))
    except RuntimeError as exc:  # the noun table needs spaCy (the nlp extra) or the offline choice
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    built = sum(len(step.built) for step in steps)
    print(
        f"ready: {built} cache entries built in {sum(step.seconds for step in steps):.1f} s, under {cache_root() / 'webshop'}"
    )
    return 0
