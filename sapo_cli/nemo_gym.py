"""``sapo-gym nemo-gym init DIR --env ID[:SPLIT] ...``: write a NeMo-Gym project that plays the registered envs.

The project (:func:`sapo_gym.integrations.nemo_gym.write_project`) holds the sapo_gym resources server with each
env's identity, NeMo-Gym's ``gymnasium_agent`` to play it, one dataset per env (every task of the split once per
seed, or the first ``--limit``: :func:`sapo_gym.integrations.episodes.task_rows`), a ``vllm_model`` policy config
and ``env.yaml``. NeMo-Gym's own commands run it (``gym env start``, ``gym eval run``: docs/integrations.md#nemo-gym);
``sapo-gym bundle`` turns one env's rollouts into a result bundle.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys

__all__ = ["register", "run_init"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("nemo-gym", help="NeMo-Gym: write a project whose resources server plays the envs")
    cmds = p.add_subparsers(dest="nemo_gym_command", required=True, metavar="SUBCOMMAND")
    init = cmds.add_parser("init", help="write a NeMo-Gym project (resources server, agent, datasets) for some envs")
    init.add_argument("directory", help="the project folder (NeMo-Gym's commands run from it)")
    init.add_argument(
        "--env",
        action="append",
        required=True,
        metavar="ID[:SPLIT]",
        help="a registered env id, optionally with its split (default: its first evaluation split); repeatable",
    )
    init.add_argument("--seeds", default="0", help="comma-separated seeds: one dataset row per (seed, task)")
    init.add_argument(
        "--limit",
        type=int,
        default=None,
        help="only the first N tasks of each split (a bundle for a board needs them all)",
    )
    init.add_argument(
        "--env-arg", action="append", default=[], metavar="KEY=VALUE", help="a gym.make argument of every env listed"
    )
    init.add_argument(
        "--venv",
        default=None,
        help="the virtualenv every server runs in (default: this interpreter's, when "
        "it has nemo-gym; else NeMo-Gym builds one per server with uv)",
    )
    init.add_argument(
        "--model-url", default=None, help="the policy's OpenAI-compatible base URL (env.yaml policy_base_url)"
    )
    init.add_argument("--model-name", default=None, help="the served model's name (env.yaml policy_model_name)")
    init.add_argument(
        "--model-api-key", default=None, help="its API key (env.yaml policy_api_key; default EMPTY with --model-url)"
    )
    init.set_defaults(func=run_init)


def run_init(args: argparse.Namespace) -> int:
    from sapo_gym.integrations.episodes import task_rows
    from sapo_gym.integrations.nemo_gym import AGENT, board_split, write_project
    from sapo_gym.registration import parse_env_args

    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    env_args = parse_env_args(args.env_arg)
    plans = []
    for text in args.env:
        env_id, _, split = text.partition(":")
        plans.append(
            [row for row, _ in task_rows(env_id, board_split(env_id, split or None), seeds, env_args, args.limit)]
        )
    venv = args.venv or (sys.prefix if importlib.util.find_spec("nemo_gym") is not None else None)
    api_key = args.model_api_key or ("EMPTY" if args.model_url else None)  # a local vLLM takes any key
    settings = {
        key: value
        for key, value in (
            ("policy_base_url", args.model_url),
            ("policy_model_name", args.model_name),
            ("policy_api_key", api_key),
        )
        if value is not None
    }
    config = write_project(args.directory, plans, venv, settings)
    for rows in plans:
        print(f"{rows[0]['env_id']}:{rows[0]['split']}: {len(rows)} rows, spec {rows[0]['spec_hash']}")
    print(f"wrote {config} (agent {AGENT}); servers run in {venv or 'per-server uv venvs'}")
    return 0
