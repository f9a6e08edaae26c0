"""``sapo-gym data alfworld``: fetch and verify the official games, or generate more games.

* ``sapo-gym data alfworld [--data-dir DIR]`` — download the official games with alfworld's own
  downloader (``alfworld-download``) into DIR (default ``$ALFWORLD_DATA`` or ``~/.cache/alfworld``)
  when the internet is reachable, then verify the per-split counts. Offline, it says how to point
  sapo_gym at an existing copy.
* ``sapo-gym data alfworld --verify-only [--data-dir DIR]`` — only verify the counts.
* ``sapo-gym data alfworld --generate N --seed S [--eval M] [--out FILE]`` — generate a new set of
  N train + M games per evaluation split with our generator (labelled ``generated-v1-seedS``); use
  it with ``gym.make("sapo/ALFWorld-v0", data_dir=FILE)``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

__all__ = ["register_data_cli", "verify_counts"]

_DOWNLOAD_HOST = ("github.com", 443)


def register_data_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("alfworld", help="fetch/verify the official ALFWorld games, or generate games")
    p.add_argument(
        "--data-dir", default=None, help="root holding json_2.1.1/ (default: $ALFWORLD_DATA or ~/.cache/alfworld)"
    )
    p.add_argument("--verify-only", action="store_true", help="do not download; only verify the per-split counts")
    p.add_argument(
        "--generate", type=int, default=None, metavar="N", help="generate N train games (and --eval per eval split)"
    )
    p.add_argument(
        "--eval",
        type=int,
        default=None,
        metavar="M",
        help="games per evaluation split when generating (default N // 4)",
    )
    p.add_argument("--seed", type=int, default=0, help="generator seed")
    p.add_argument(
        "--max-receptacles",
        type=int,
        default=None,
        metavar="K",
        help="at most K receptacles per room (the ALFWorld-Mini variant, generated-mini-v1; default: all)",
    )
    p.add_argument(
        "--max-distractors",
        type=int,
        default=None,
        metavar="D",
        help="at most D object types besides the goal's per room (ALFWorld-Mini; default: all of the scene's)",
    )
    p.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 1) // 2), help="generator processes")
    p.add_argument(
        "--out",
        default=None,
        help="generated set file (default ~/.cache/sapo_gym/alfworld/generated-v1-seedS.jsonl.gz)",
    )
    p.set_defaults(func=run)


def _default_root() -> Path:
    return Path(os.environ.get("ALFWORLD_DATA") or "~/.cache/alfworld").expanduser()


def _online(timeout: float = 3.0) -> bool:
    try:
        socket.create_connection(_DOWNLOAD_HOST, timeout=timeout).close()
        return True
    except OSError:
        return False


def verify_counts(root: Path) -> dict[str, tuple[int, int]]:
    """``split -> (found, expected)`` for the official data under ``root``."""
    from sapo_gym.alfworld.catalog import OFFICIAL_COUNTS, SPLITS, official_catalog

    out = {}
    for split, folder in SPLITS.items():
        split_dir = root / "json_2.1.1" / folder
        found = len(official_catalog(split_dir.resolve())) if split_dir.is_dir() else 0
        out[split] = (found, OFFICIAL_COUNTS[split])
    return out


def _report(root: Path) -> int:
    counts = verify_counts(root)
    for split, (found, expected) in counts.items():
        mark = "ok" if found == expected else ("absent" if found == 0 else "MISMATCH")
        print(f"  {split:<26} {found:>5} / {expected:<5} {mark}")
    return 0 if all(f == e for f, e in counts.values()) else 1


def _offline_message(root: Path) -> str:
    return (
        f"Cannot reach {_DOWNLOAD_HOST[0]}: the official ALFWorld games cannot be downloaded from here.\n"
        "If you have a copy (a folder holding json_2.1.1/{train,valid_seen,valid_unseen}/), point sapo_gym at it:\n"
        "    export ALFWORLD_DATA=/path/to/that/folder        # or\n"
        '    gym.make("sapo/ALFWorld-v0", data_dir="/path/to/that/folder")\n'
        f"then check it with `sapo-gym data alfworld --verify-only --data-dir /path/to/that/folder`.\n"
        f"Without it, sapo/ALFWorld-v0 runs on the embedded generated set (generated-v1), not the official games.\n"
        f"(looked for the data in {root})"
    )


def _download(root: Path) -> int:
    if not _online():
        print(_offline_message(root), file=sys.stderr)
        return 2
    exe = shutil.which("alfworld-download")
    if exe is None:
        print("alfworld-download not found: pip install 'sapo-gym[alfworld]'", file=sys.stderr)
        return 2
    root.mkdir(parents=True, exist_ok=True)
    print(f"downloading the official ALFWorld games into {root} with alfworld's downloader ...")
    return subprocess.call([exe], env={**os.environ, "ALFWORLD_DATA": str(root)})


def _generate(args: argparse.Namespace) -> int:
    from sapo_gym.alfworld.generator.build import dataset_name, generate, write_set

    k, d = args.max_receptacles, args.max_distractors
    dataset = dataset_name(k, d)
    n_eval = args.eval if args.eval is not None else max(1, args.generate // 4)
    out = Path(args.out or f"~/.cache/sapo_gym/alfworld/{dataset}-seed{args.seed}.jsonl.gz").expanduser()
    counts = {"train": args.generate, "eval_in_distribution": n_eval, "eval_out_of_distribution": n_eval}
    games = generate(counts, seed=args.seed, workers=args.workers, max_receptacles=k, max_distractors=d)
    n = write_set(games, out, seed=args.seed, max_receptacles=k, max_distractors=d)
    print(f"wrote {n} generated games ({dataset}, seed {args.seed}) to {out}")
    env_id = "sapo/ALFWorld-v0" if dataset == "generated-v1" else "sapo/ALFWorld-Mini-v0"
    print(f'use them with gym.make("{env_id}", data_dir="{out}")')
    return 0


def run(args: argparse.Namespace) -> int:
    if args.generate is not None:
        return _generate(args)
    root = Path(args.data_dir).expanduser() if args.data_dir else _default_root()
    if not args.verify_only and not (root / "json_2.1.1").is_dir():
        status = _download(root)
        if status != 0:
            return status
    if not (root / "json_2.1.1").is_dir():
        print(_offline_message(root) if not args.verify_only else f"no json_2.1.1/ under {root}", file=sys.stderr)
        return 2
    print(f"official ALFWorld games under {root} (after alfworld's filters):")
    return _report(root)
