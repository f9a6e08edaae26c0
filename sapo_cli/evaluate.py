"""``sapo-gym evaluate``: run an agent on the tasks of a split; print a per-category table.

``--mode every-task`` (default) plays every task once per seed; ``--mode verl-agent`` plays verl-agent's
validation draw (``--workers`` episodes per seed, worker ``i`` on the game TextWorld's batch env seeded
``seed + 1000 + i`` deals; ``sapo_gym.evaluation.EvaluationMode``). The table's title, the ``--json``
file and the bundle name the split and the mode.

``--out BUNDLE.json`` writes a leaderboard result bundle (``leaderboard/schema/bundle-v1.json``)
for ``sapo-gym submit``; the ``--agent-*`` flags fill in its agent metadata.

``--agent-process auto`` (default) runs every agent but the built-in ``expert``, ``random`` and ``search``
in a spawned process of its own that receives only the public observation and info
(:mod:`agents.isolated`); the bundle records how the agent ran (``evaluation.harness.agent_process``).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="evaluate an agent on every task of a split")
    p.add_argument("--agent", default="expert", help="expert | random | search (ALFWorld, observation-only) | module:Class | HF model path | openai:URL#MODEL")
    p.add_argument("--env", default="sapo/ALFWorld-v0", help="registered env id")
    p.add_argument("--split", default=None, help="split name (env-specific; default: the env's evaluation split)")
    p.add_argument("--seeds", default="0", help="comma-separated seeds, one pass over the split (or one draw) each")
    p.add_argument("--mode", default="every-task", help="every-task (each task once per seed; what boards rank) | "
                   "verl-agent (verl-agent's validation: --workers episodes per seed, worker i on a game drawn with seed+1000+i)")
    p.add_argument("--workers", type=int, default=None, help="verl-agent mode: validation envs, one episode each (default 128)")
    p.add_argument("--round", type=int, default=0, help="verl-agent mode: which validation of a run (0: the first, before training)")
    p.add_argument("--batch-size", type=int, default=8, help="envs stepped together (the agent acts on a batch)")
    p.add_argument("--limit", type=int, default=None, help="only the first N tasks of the split (a bundle needs them all)")
    p.add_argument("--data-dir", default=None, help="dataset folder (else the env's default lookup)")
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="extra gym.make keyword argument, repeatable (e.g. protocol=tool-call-v1; for sapo/Remote-v0: "
                        "url=http://127.0.0.1:8765 and env_id=sapo/ALFWorld-v0)")
    p.add_argument("--agent-process", default="auto", choices=("auto", "isolated", "in-process"),
                   help="auto (default): module:Class, HF, smollm2/tiny and openai: agents run in a spawned process of their own "
                        "that gets only the public observation and info; expert/random/search in this one | isolated | in-process "
                        "(the bundle records which)")
    p.add_argument("--json", dest="json_out", default=None, help="write the per-episode records and summary here")
    p.add_argument("--out", dest="bundle_out", default=None,
                   help="write a leaderboard result bundle (JSON) here (without --split: the env's first leaderboard split)")
    from leaderboard.agent_args import add_agent_arguments

    add_agent_arguments(p)
    p.set_defaults(func=run)


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
    import gymnasium as gym

    import sapo_gym  # noqa: F401
    from agents.isolated import IsolatedAgent, agent_process, load_for_harness
    from sapo_gym.evaluation import evaluate, evaluation_mode, format_table, summarize

    # read before any backend is loaded (some parse or rewrite sys.argv)
    command = "sapo-gym " + shlex.join(sys.argv[1:]) if sys.argv and sys.argv[0].endswith(("sapo-gym", "__main__.py")) else None
    env_kwargs = _env_kwargs(args)
    seeds = [int(s) for s in str(args.seeds).split(",") if s.strip()]
    mode = evaluation_mode(args.mode, args.workers, args.round)  # before any env is built: a bad name fails fast
    envs = [gym.make(args.env, **env_kwargs) for _ in range(max(1, args.batch_size))]
    probe = envs[0].unwrapped  # the batch's first env tells the split, its tasks and the spec (nothing loads twice)
    ids = list(probe.task_ids)
    split, spec_fields, spec_hash = probe.split, probe.spec_fields(), probe.spec_hash()
    dataset = spec_fields["dataset"]
    if args.limit:
        ids = ids[: args.limit]
    agent = None
    try:  # an isolated agent is a fresh interpreter (fork + exec, never a bare fork): the envs built above are not in it
        agent = load_for_harness(args.agent, seed=seeds[0] if seeds else 0, process=args.agent_process)
        records = evaluate(agent, args.env, task_ids=ids, seeds=seeds, envs=envs, mode=mode)
    finally:
        for env in envs:
            env.close()
        if isinstance(agent, IsolatedAgent):
            agent.close()
    summary = summarize(records)
    title = f"{args.env} · split={split} · mode={mode.describe()} · dataset={dataset} · agent={args.agent} · seeds={seeds}"
    print(format_table(summary, title=title))
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump({"split": split, "mode": mode.record(), "summary": summary, "episodes": [r.to_dict() for r in records]}, fh)
    if args.bundle_out:
        from leaderboard.agent_args import agent_info_from_args
        from leaderboard.bundle import build_bundle

        info = agent_info_from_args(args, args.agent)
        if info.decoding is None and isinstance(getattr(agent, "constrain", None), str):  # an LLM agent says how it decoded
            info.decoding = agent.constrain
        bundle = build_bundle(records, spec_fields, spec_hash, info, seeds, args.batch_size, command, mode=mode,
                              agent_process=agent_process(agent))
        with open(args.bundle_out, "w") as fh:
            json.dump(bundle, fh, allow_nan=False)
        if args.limit or mode.name != "every-task":
            print("note: a leaderboard accepts only every-task bundles of the whole split (no --limit)", file=sys.stderr)
        print(f"wrote result bundle {args.bundle_out} ({len(records)} episodes, spec {spec_hash}); submit it with: sapo-gym submit {args.bundle_out}")
    return 0
