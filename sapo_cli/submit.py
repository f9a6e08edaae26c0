"""``sapo-gym submit BUNDLE``: send a result bundle to a leaderboard server.

``sapo-gym submit --live --agent SPEC --env ENV_ID [--split S] [--seeds N]``: play the agent through the
server's live evaluation instead (the server deals the tasks and seeds and records every turn). An agent
that answers one env at a time plays up to ``--concurrency`` (8) episodes at once (as many as the server
allows), as ``sapo-gym evaluate`` does.
"""

from __future__ import annotations

import argparse
import os


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "submit", help="submit a result bundle (from 'sapo-gym evaluate --out') to a leaderboard, or play --live"
    )
    p.add_argument("bundle", nargs="?", default=None, help="the bundle JSON file (not with --live)")
    p.add_argument(
        "--live", action="store_true", help="live evaluation: the agent plays through the server's env endpoint"
    )
    p.add_argument("--agent", default=None, help="--live: the agent spec (as for 'sapo-gym evaluate --agent')")
    p.add_argument("--env", default=None, help="--live: the board's env id")
    p.add_argument(
        "--split", default=None, help="--live: the board's split (default: the env's first evaluation split)"
    )
    p.add_argument(
        "--seeds", type=int, default=1, help="--live: passes over the split (the server draws the seed values)"
    )
    p.add_argument(
        "--server",
        default=os.environ.get("SAPO_GYM_SERVER", "http://127.0.0.1:8000"),
        help="leaderboard URL (default: $SAPO_GYM_SERVER or http://127.0.0.1:8000)",
    )
    p.add_argument("--token", default=os.environ.get("SAPO_GYM_TOKEN"), help="API token (default: $SAPO_GYM_TOKEN)")
    p.add_argument(
        "--wait", action="store_true", help="wait until the replay verification is over and print its result"
    )
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait with --wait")
    from agents.config import add_config_arguments
    from leaderboard.agent_args import add_agent_arguments

    add_config_arguments(p, rename={"timeout": "--request-timeout"})  # --live: the agent's settings, as for 'evaluate'
    add_agent_arguments(p)
    p.set_defaults(func=run)


def _live(args: argparse.Namespace) -> int:
    from agents.registry import load_agent
    from leaderboard.agent_args import agent_info_from_args
    from leaderboard.client import SubmitError, wait_for_verification
    from leaderboard.live_client import play_live
    from sapo_gym.registration import ENVS

    if args.bundle or not args.agent or not args.env:
        raise ValueError("--live takes --agent and --env (and no bundle file)")
    entry = ENVS.get(args.env)
    split = args.split or (entry.eval_splits[0] if entry is not None and entry.eval_splits else "test")
    from agents.config import config_from_args

    config = config_from_args(args)
    agent = load_agent(args.agent, config=config)
    info = agent_info_from_args(args, args.agent)
    if isinstance(getattr(agent, "generation", None), dict):
        info.generation = dict(agent.generation)
    try:
        result = play_live(
            agent,
            args.server,
            args.token,
            args.env,
            split,
            info,
            seeds=args.seeds,
            concurrency=config.concurrency or 8,
            progress=True,
        )
    except SubmitError as exc:
        print(f"refused: {exc}")
        return 1
    sub = result.submission
    if sub.get("id") is None:
        print(f"live run {result.run_id}: {result.episodes} episodes played, not admitted: {sub.get('message')}")
        return 1
    print(
        f"live run {result.run_id}: {result.episodes} episodes played ({result.parallel} at once), "
        f"submission {sub['id']} ({sub['status']}): {result.url}"
    )
    if args.wait:
        record = wait_for_verification(
            f"{args.server.rstrip('/')}/api/v1/submissions/{sub['id']}", timeout=args.timeout
        )
        print(f"replay verification: {record['status']}: {record['status_message']}")
        return 0 if record["status"] == "verified" else 1
    return 0


def run(args: argparse.Namespace) -> int:
    from leaderboard.client import SubmitError, submit_bundle, wait_for_verification

    if not args.token:
        raise ValueError(
            "no token: pass --token or set SAPO_GYM_TOKEN (an admin makes one with 'sapo-gym leaderboard token create')"
        )
    if args.live:
        return _live(args)
    if not args.bundle:
        raise ValueError("give the bundle file to submit (or --live --agent SPEC --env ENV_ID)")
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
