"""``sapo-gym evaluate``: run an agent on the tasks of a split; print a per-category table.

``--mode every-task`` (default) plays every task once per seed; ``--mode verl-agent`` plays verl-agent's
validation draw (``--workers`` episodes per seed, worker ``i`` on the game TextWorld's batch env seeded
``seed + 1000 + i`` deals; ``sapo_gym.records.EvaluationMode``). The table's title, the ``--json``
file and the bundle name the split and the mode.

``--out BUNDLE.json`` writes a leaderboard result bundle (``sapo_gym/schema/bundle-v1.json``)
for ``sapo-gym submit``; the ``--agent-*`` flags fill in its agent metadata.

``--agent-process auto`` (default) runs every agent but the built-in ``expert``, ``random`` and ``search``
in a spawned process of its own that receives only the public observation and info
(:mod:`agents.isolated`); the bundle records how the agent ran (``evaluation.harness.agent_process``).

Agents that answer one env at a time (``openai:``) run in a continuous pool of ``--concurrency`` requests;
each finished episode goes to the episodes log, and ``--resume`` continues a run that was interrupted
(:mod:`sapo_cli.evaluate_run`; docs/evaluate.md).
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="evaluate an agent on every task of a split")
    _add_episode_arguments(p)
    _add_play_arguments(p)
    _add_output_arguments(p)
    from agents.config import add_config_arguments
    from leaderboard.agent_args import add_agent_arguments

    add_config_arguments(p)
    add_agent_arguments(p)
    p.set_defaults(func=run)


def _add_episode_arguments(p: argparse.ArgumentParser) -> None:
    """The agent, the env and which of its episodes: split, seeds, and the mode that draws them."""
    p.add_argument(
        "--agent",
        default="expert",
        help="expert | random | search (ALFWorld, observation-only) | module:Class | HF model path | openai:URL#MODEL",
    )
    p.add_argument("--env", default="sapo/ALFWorld-v0", help="registered env id")
    p.add_argument("--split", default=None, help="split name (env-specific; default: the env's evaluation split)")
    p.add_argument("--seeds", default="0", help="comma-separated seeds, one pass over the split (or one draw) each")
    p.add_argument(
        "--mode",
        default="every-task",
        help="every-task (each task once per seed; what boards rank) | "
        "verl-agent (verl-agent's validation: --workers episodes per seed, worker i on a game drawn with seed+1000+i)",
    )
    p.add_argument(
        "--workers", type=int, default=None, help="verl-agent mode: validation envs, one episode each (default 128)"
    )
    p.add_argument(
        "--round",
        type=int,
        default=0,
        help="verl-agent mode: which validation of a run (0: the first, before training)",
    )


def _add_play_arguments(p: argparse.ArgumentParser) -> None:
    """How the episodes are played: envs in flight, a task limit, the env's data and arguments, the agent's process."""
    p.add_argument(
        "--batch-size",
        type=int,
        default=8,
        help="envs in flight (the agent acts on a batch; --concurrency overrides it)",
    )
    p.add_argument(
        "--limit", type=int, default=None, help="only the first N tasks of the split (a bundle needs them all)"
    )
    p.add_argument("--data-dir", default=None, help="dataset folder (else the env's default lookup)")
    p.add_argument(
        "--env-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra gym.make keyword argument, repeatable (e.g. protocol=tool-call-v1; for sapo/Remote-v0: "
        "url=http://127.0.0.1:8765 and env_id=sapo/ALFWorld-v0)",
    )
    p.add_argument(
        "--agent-process",
        default="auto",
        choices=("auto", "isolated", "in-process"),
        help="auto (default): module:Class, HF, smollm2/tiny and openai: agents run in a spawned process of their own "
        "that gets only the public observation and info; expert/random/search in this one | isolated | in-process "
        "(the bundle records which)",
    )


def _add_output_arguments(p: argparse.ArgumentParser) -> None:
    """What the run writes: records, a result bundle, the episodes log (and resuming from it), cost estimates."""
    p.add_argument("--json", dest="json_out", default=None, help="write the per-episode records and summary here")
    p.add_argument(
        "--out",
        dest="bundle_out",
        default=None,
        help="write a leaderboard result bundle (JSON) here (without --split: the env's first leaderboard split)",
    )
    p.add_argument(
        "--episodes-log",
        default=None,
        metavar="PATH",
        help="append each finished episode here as it ends (fsync'd JSONL; docs/evaluate.md); default "
        "<--out>.episodes.jsonl, else <--json>.episodes.jsonl, else none",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the run of --episodes-log: skip its done episodes (each checked and replayed first), play "
        "its errored and missing ones (refused when the log's run differs from this one, a line is not one of "
        "this run's episodes, or another evaluate holds the log)",
    )
    p.add_argument(
        "--price-prompt",
        type=float,
        default=None,
        metavar="USD",
        help="price per million prompt tokens (cost estimate)",
    )
    p.add_argument(
        "--price-completion",
        type=float,
        default=None,
        metavar="USD",
        help="price per million completion tokens (cost estimate)",
    )
    p.add_argument(
        "--strict-board",
        action="store_true",
        help="with --out: refuse to start unless the bundle can land on a hosted board",
    )


def _env_kwargs(args: argparse.Namespace) -> dict:
    from sapo_gym.registration import ENVS, parse_env_args

    env_kwargs = parse_env_args(args.env_arg)
    if args.data_dir:
        env_kwargs["data_dir"] = args.data_dir
    if args.split:
        env_kwargs["split"] = args.split
    else:  # evaluation (and a bundle for a leaderboard board) defaults to the env's evaluation split
        entry = ENVS.get(args.env)
        if entry is not None and entry.eval_splits:
            env_kwargs["split"] = entry.eval_splits[0]
    return env_kwargs


def run(args: argparse.Namespace) -> int:
    from sapo_cli.evaluate_run import run_evaluation

    return run_evaluation(args, _env_kwargs(args))
