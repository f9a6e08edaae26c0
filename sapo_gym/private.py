"""Private splits: tasks generated from a secret seed and never published.

``split="private"`` with ``private_seed=<hex>`` builds a split that no public set holds: the
ALFWorld generator's games (``sapo/ALFWorld-Mini-v0``, ``sapo/ALFWorld-v0``) or WebShop goals over
the generated catalog (``sapo/WebShop-v0``), drawn from the seed and checked against every public
split. The env's ``spec_hash()`` covers the generated content (a digest of it names the dataset),
never the seed; the same seed gives the same split and spec hash on any machine, so a seed revealed
when the split is retired lets anyone regenerate the split and compare the hash with the board's.

Each env derives its own generator seed from the secret (:func:`derive`), so one secret serves
every env's private split without the splits sharing randomness.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["PRIVATE_SPLIT", "MIN_SEED_HEX", "check_seed", "derive"]

PRIVATE_SPLIT = "private"
"""The split name of a private split (the boards key it as ``env_id:private``)."""
MIN_SEED_HEX = 32
"""A private seed is at least this many hex digits (128 bits; the leaderboard draws 256)."""
_HEX = re.compile(r"[0-9a-f]+")


def check_seed(seed: object) -> str:
    """``seed`` as lower-case hex, or a ValueError that does not repeat it (errors get logged)."""
    text = seed.strip().lower() if isinstance(seed, str) else ""
    if not _HEX.fullmatch(text) or len(text) < MIN_SEED_HEX or len(text) % 2:
        raise ValueError(
            f"split='private' needs private_seed: a secret of at least {MIN_SEED_HEX} hex digits, an even "
            "number of them (e.g. secrets.token_hex(32))"
        )
    return text


def derive(seed: str, label: str) -> str:
    """The generator seed of one env's private split: sha256 of a domain tag, ``label`` and the secret."""
    blob = b"sapo-gym/private-split/derive/v1\0" + label.encode() + b"\0" + bytes.fromhex(check_seed(seed))
    return hashlib.sha256(blob).hexdigest()
