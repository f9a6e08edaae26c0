"""``sapo-gym submit BUNDLE``: send a result bundle to a leaderboard server."""

from __future__ import annotations

import argparse
import os


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("submit", help="submit a result bundle (from 'sapo-gym evaluate --out') to a leaderboard")
    p.add_argument("bundle", help="the bundle JSON file")
    p.add_argument("--server", default=os.environ.get("SAPO_GYM_SERVER", "http://127.0.0.1:8000"),
                   help="leaderboard URL (default: $SAPO_GYM_SERVER or http://127.0.0.1:8000)")
    p.add_argument("--token", default=os.environ.get("SAPO_GYM_TOKEN"), help="API token (default: $SAPO_GYM_TOKEN)")
    p.add_argument("--wait", action="store_true", help="wait until the replay verification is over and print its result")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait with --wait")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from leaderboard.client import SubmitError, submit_bundle, wait_for_verification

    if not args.token:
        raise ValueError("no token: pass --token or set SAPO_GYM_TOKEN (an admin makes one with 'sapo-gym leaderboard token create')")
    with open(args.bundle, "rb") as fh:
        data = fh.read()
    try:
        receipt = submit_bundle(data, args.server, args.token)
    except SubmitError as exc:
        print(f"rejected: {exc}")
        return 1
    what = "already stored as" if receipt.duplicate else "accepted as"
    print(f"{what} submission {receipt.id} ({receipt.status}): {receipt.url}")
    if args.wait:
        record = wait_for_verification(receipt.api_url, timeout=args.timeout)
        print(f"replay verification: {record['status']}: {record['status_message']}")
        return 0 if record["status"] == "verified" else 1
    return 0
