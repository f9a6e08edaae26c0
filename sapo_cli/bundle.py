"""``sapo-gym bundle ROLLOUTS --out FILE``: a leaderboard result bundle from an ecosystem's rollouts.

ROLLOUTS is a JSON Lines file in which an adapter of :mod:`sapo_gym.integrations` filed its episodes under
``"sapo_gym"`` (:meth:`sapo_gym.integrations.episodes.EpisodePlay.payload`): verifiers' ``traces.jsonl``
(``vf-eval sapo-gym-verifiers ...``) or the SkyRL env's ``record_path`` file. The episodes (whole ones, one env,
each task and seed once: :func:`sapo_gym.integrations.episodes.bundle_inputs`) are replayed here as a board
replays them (:func:`leaderboard.replay.replay_bundle`) before the bundle is written; the per-category table and
the board the bundle lands on (or why none) are printed, as ``sapo-gym evaluate`` prints them. ``sapo-gym submit``
sends the bundle.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from typing import Any

__all__ = ["register", "run", "bundle_from_payloads"]


def register(sub: argparse._SubParsersAction) -> None:
    from leaderboard.agent_args import add_agent_arguments

    p = sub.add_parser(
        "bundle",
        help="a result bundle from an ecosystem's rollouts (verifiers traces.jsonl, the SkyRL env's record file)",
    )
    p.add_argument("rollouts", help="the JSON Lines file the adapter filed its episodes in")
    p.add_argument("--out", required=True, help="where to write the bundle (JSON)")
    add_agent_arguments(p)
    p.set_defaults(func=run)


def bundle_from_payloads(payloads: list[dict[str, Any]], agent: Any, command: str | None = None) -> dict[str, Any]:
    """The every-task bundle of the episodes in ``payloads`` (``agent``: a :class:`sapo_gym.bundle.AgentInfo`)."""
    from sapo_gym.bundle import build_bundle
    from sapo_gym.integrations.episodes import bundle_inputs
    from sapo_gym.records import EVERY_TASK

    spec_fields, spec_hash, records, seeds = bundle_inputs(payloads)
    return build_bundle(records, spec_fields, spec_hash, agent, seeds, command=command, mode=EVERY_TASK)


def _covers_split(bundle: dict[str, Any]) -> bool:
    """Whether every seed's episodes are the split's tasks, each once (what a board admits)."""
    from leaderboard.boards import make_env

    env = make_env(bundle["env"]["id"], bundle["env"]["split"])
    try:
        every = sorted(env.unwrapped.task_ids)
    finally:
        env.close()
    played: dict[int, list[str]] = defaultdict(list)
    for episode in bundle["episodes"]:
        played[episode["seed"]].append(episode["task_id"])
    return all(sorted(tasks) == every for tasks in played.values())


def run(args: argparse.Namespace) -> int:
    from leaderboard.agent_args import agent_info_from_args
    from leaderboard.landing import board_verdict
    from leaderboard.replay import replay_bundle
    from sapo_cli.evaluate_run import recorded_command
    from sapo_gym.evaluation import format_table, summarize
    from sapo_gym.files import write_atomic
    from sapo_gym.integrations.episodes import read_payloads
    from sapo_gym.records import EpisodeRecord

    payloads = read_payloads(args.rollouts)
    bundle = bundle_from_payloads(
        payloads, agent_info_from_args(args, f"rollouts:{args.rollouts}"), recorded_command(sys.argv)
    )
    replay = replay_bundle(bundle)
    if replay.verifiable and not replay.verified:
        raise ValueError(f"the rollouts do not replay: {replay.message}")
    env = bundle["env"]
    print(
        format_table(summarize([EpisodeRecord.from_dict(p["record"]) for p in payloads]), f"{env['id']}:{env['split']}")
    )
    print(f"replay: {replay.message}", file=sys.stderr)
    fields = {k: v for k, v in env.items() if k != "spec_hash"}
    verdict = board_verdict(env["id"], env["split"], fields, env["spec_hash"], "every-task", not _covers_split(bundle))
    print(verdict.describe(env["spec_hash"]), file=sys.stderr)
    write_atomic(args.out, json.dumps(bundle, allow_nan=False).encode(), "bundle")
    print(f"wrote {args.out}: {len(bundle['episodes'])} episodes")
    return 0
