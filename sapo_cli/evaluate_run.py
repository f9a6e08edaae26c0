"""The body of ``sapo-gym evaluate``: build the envs and the agent, check the board, play (pool or lockstep),
log each episode, resume, and write the table, ``--json`` and ``--out``.

What ends a run: every episode done (exit 0); a bad flag, an output path that is a symbolic link, a log of
another run, a log that does not check out or one another evaluation holds (exit 2, before any request);
Ctrl-C (exit 130), a request that failed past its retry budget, a log or output file that cannot be written
(exit 1). In the last cases every episode finished so far is in the episodes log, and the message says how
to resume.

On ``--resume`` every episode the log holds as done is replayed in the env before it is trusted (its outputs
must give back its observations, rewards and outcome: :func:`leaderboard.replay.replay_episode`), and it must
have been played with this run's agent's view (privileged or not). The outputs (the table, ``--json``, the
bundle) are written from the episodes alone, each file atomically, while the log is still locked.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from collections.abc import Sequence
from typing import Any

from agents.config import OUTPUT_FIELDS, AgentConfig, agent_kind, check_honoured, config_from_args

__all__ = ["run_evaluation", "recorded_command", "run_identity", "MAX_PRICE"]

MAX_PRICE = 1e6
"""The largest --price-prompt/--price-completion taken, in USD per million tokens."""


def recorded_command(argv: Sequence[str]) -> str | None:
    """``sapo-gym ...`` as typed, without ``--resume`` (a resumed run records the command of the run it completes)."""
    if not argv or not argv[0].endswith(("sapo-gym", "__main__.py")):
        return None
    return "sapo-gym " + shlex.join([a for a in argv[1:] if a != "--resume"])


def run_identity(
    args: argparse.Namespace,
    env_kwargs: dict[str, Any],
    config: AgentConfig,
    probe_fields: dict[str, Any],
    spec_hash: str,
    ids: list[str],
    seeds: list[int],
    mode: Any,
    lockstep: int | None,
) -> dict[str, Any]:
    """What an episodes log's header records: everything that can change the episodes' outputs."""
    settings = {
        k: (list(v) if isinstance(v, tuple) else v) for k, v in ((f, getattr(config, f)) for f in OUTPUT_FIELDS)
    }
    return {
        "env_id": args.env,
        "spec_hash": spec_hash,
        "split": probe_fields["split"],
        "dataset": probe_fields["dataset"],
        "protocol": probe_fields["protocol"],
        "prompt": probe_fields.get("prompt"),
        "env_kwargs": {k: v for k, v in sorted(env_kwargs.items()) if k != "data_dir"},
        "mode": mode.record(),
        "seeds": seeds,
        "tasks": ids,
        "agent": args.agent,
        "agent_process": args.agent_process,
        "generation": {k: v for k, v in settings.items() if v is not None},
        "lockstep_batch": lockstep,
    }


def _board_check(args: argparse.Namespace, spec_fields: dict[str, Any], spec_hash: str, mode: Any) -> None:
    from leaderboard.landing import board_verdict

    verdict = board_verdict(args.env, spec_fields["split"], spec_fields, spec_hash, mode.name, bool(args.limit))
    print(verdict.describe(spec_hash), file=sys.stderr)
    if args.strict_board and not verdict.lands:
        raise ValueError("--strict-board: " + "; ".join(verdict.reasons))


def _log_path(args: argparse.Namespace) -> str | None:
    from sapo_gym.episode_log import default_log_path

    return args.episodes_log or default_log_path(args.bundle_out, args.json_out)


def _check_flags(args: argparse.Namespace) -> None:
    """Before anything runs: the prices are numbers a cost can be computed from; no output path is a symbolic link."""
    from sapo_gym.files import refuse_symlink

    for flag, price in (("--price-prompt", args.price_prompt), ("--price-completion", args.price_completion)):
        if price is not None and not (math.isfinite(price) and 0 <= price <= MAX_PRICE):
            raise ValueError(f"{flag} must be USD per million tokens in [0, {MAX_PRICE:g}], got {price}")
    for what, path in (
        ("bundle (--out)", args.bundle_out),
        ("--json file", args.json_out),
        ("episodes log", _log_path(args)),
    ):
        if path:
            folder = refuse_symlink(path, what).parent
            if not folder.is_dir():
                raise ValueError(f"the {what} {path} cannot be written: its folder {folder} does not exist")


def _open_log(args: argparse.Namespace, run: dict[str, Any], jobs: list) -> Any:
    from sapo_gym.episode_log import EpisodeLog

    path = _log_path(args)
    if path is None:
        if args.resume:
            raise ValueError(
                "--resume needs an episodes log: --episodes-log PATH (or the --out/--json it defaults from)"
            )
        return None
    return EpisodeLog.open(path, run, resume=args.resume, plan={job.key: job.task_id for job in jobs})


def _verify_done(log: Any, env: Any, agent: Any) -> None:
    """Replay every episode the log holds as done: a log whose numbers are not its episodes' is refused."""
    from leaderboard.replay import replay_episode
    from sapo_gym.bundle import episode_dict
    from sapo_gym.episode_log import LogMismatch
    from sapo_gym.records import is_privileged

    privileged = is_privileged(agent)
    print(f"resume: replaying the {len(log.done)} episodes {log.path} holds as done, to check them", file=sys.stderr)
    for key in sorted(log.done):
        record, where = log.done[key], f"{log.path} line {log.lines.get(key, '?')}"
        if record.privileged != privileged:
            raise LogMismatch(
                f"{where}: the episode was played {'with' if record.privileged else 'without'} the privileged "
                f"info, this run's agent is {'' if privileged else 'not '}privileged"
            )
        problem = replay_episode(env, episode_dict(record))
        if problem is not None:
            problem = problem.replace("bundle", "log")  # what replay_episode compares with is the log's record here
            raise LogMismatch(
                f"{where} (task {record.task_id!r}, seed {record.seed}) does not replay in the env: {problem} "
                f"(the log was edited or is another env's; without --resume a new run starts and keeps it as "
                f"{log.path.name}.prev)"
            )


def _resume_hint(log: Any, total: int) -> str:
    if log is None:
        return "nothing was saved (no --episodes-log, --out or --json)"
    command = recorded_command(sys.argv) or "the same sapo-gym evaluate command"
    return f"{len(log.done)} of {total} episodes are saved in {log.path}; continue with: {command} --resume"


def _play(agent: Any, envs: list, jobs: list, log: Any, label: str) -> list:
    from sapo_gym.accounting import Progress
    from sapo_gym.episode_log import LogWriteError
    from sapo_gym.pool import EvaluationAborted, run_episodes

    done = dict(log.done) if log is not None else {}
    progress = Progress(len(jobs), already=sum(1 for j in jobs if j.key in done), label=label)
    on_end = (lambda job, rec: log.episode(job.seed, job.slot, job.task_id, rec)) if log is not None else None
    try:
        return run_episodes(agent, envs, jobs, done=done, on_end=on_end, progress=progress)
    except EvaluationAborted as exc:
        if log is not None:
            try:
                log.error(exc.job.seed, exc.job.slot, exc.job.task_id, str(exc.cause))
            except LogWriteError:
                pass  # the episode is not done either way; the error below is what matters
        print(f"\nerror: {exc}\n{_resume_hint(log, len(jobs))}", file=sys.stderr)
        raise SystemExit(1) from None
    except LogWriteError as exc:
        print(f"\nerror: {exc}\n{_resume_hint(log, len(jobs))}", file=sys.stderr)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        print(f"\n{_resume_hint(log, len(jobs))}", file=sys.stderr)
        raise
    finally:
        progress.close()


def _outputs(
    args: argparse.Namespace,
    records: list,
    agent: Any,
    split: str,
    mode: Any,
    seeds: list[int],
    spec: tuple,
    batch: int,
    created: str | None,
) -> None:
    from sapo_gym.accounting import format_usage, usage_totals
    from sapo_gym.evaluation import format_table, summarize
    from sapo_gym.files import write_atomic

    spec_fields, spec_hash = spec
    summary = summarize(records)
    usage = usage_totals(records, args.price_prompt, args.price_completion)
    title = (
        f"{args.env} · split={split} · mode={mode.describe()} · dataset={spec_fields['dataset']} · agent={args.agent} "
        f"· seeds={seeds}"
    )
    print(format_table(summary, title=title))
    print(format_usage(usage))
    if args.json_out:
        write_atomic(
            args.json_out,
            json.dumps(
                {
                    "split": split,
                    "mode": mode.record(),
                    "summary": summary,
                    "usage": usage,
                    "episodes": [r.to_dict() for r in records],
                }
            ).encode(),
            "--json file",
        )
    if args.bundle_out:
        _write_bundle(args, records, agent, mode, seeds, spec, batch, created)


def _write_bundle(
    args: argparse.Namespace,
    records: list,
    agent: Any,
    mode: Any,
    seeds: list[int],
    spec: tuple,
    batch: int,
    created: str | None,
) -> None:
    """Write the result bundle of ``records`` to ``--out`` (the agent's metadata from its flags and from ``agent``)."""
    from agents.isolated import agent_process
    from leaderboard.agent_args import agent_info_from_args
    from sapo_gym.bundle import build_bundle
    from sapo_gym.files import write_atomic

    spec_fields, spec_hash = spec
    info = agent_info_from_args(args, args.agent)
    # an LLM agent says how it decoded
    if info.decoding is None and isinstance(getattr(agent, "constrain", None), str):
        info.decoding = agent.constrain
    if isinstance(getattr(agent, "generation", None), dict):
        info.generation = dict(agent.generation)
    bundle = build_bundle(
        records,
        spec_fields,
        spec_hash,
        info,
        seeds,
        batch,
        recorded_command(sys.argv),
        mode=mode,
        agent_process=agent_process(agent),
        created=created,
    )
    write_atomic(args.bundle_out, json.dumps(bundle, allow_nan=False).encode(), "bundle")
    print(
        f"wrote result bundle {args.bundle_out} ({len(records)} episodes, spec {spec_hash}); submit it with: "
        f"sapo-gym submit {args.bundle_out}"
    )


def _check_config(spec: str, config: AgentConfig) -> None:
    kind = agent_kind(spec)
    if kind != "module":  # a module:Class is checked where it is imported (it may take a config)
        check_honoured(config, kind)


def _write_outputs(args: argparse.Namespace, log: Any, outputs: tuple) -> None:
    """:func:`_outputs`; a file that cannot be written ends the run with the command that writes it again."""
    from sapo_gym.files import OutputFileError

    try:
        _outputs(*outputs)
    except OutputFileError as exc:
        records = outputs[1]
        print(f"error: {exc}\n{_resume_hint(log, len(records))}", file=sys.stderr)
        raise SystemExit(1) from None


def run_evaluation(args: argparse.Namespace, env_kwargs: dict[str, Any]) -> int:
    import gymnasium as gym

    import sapo_gym  # noqa: F401
    from agents.isolated import IsolatedAgent, load_for_harness
    from sapo_gym.episode_log import run_created
    from sapo_gym.interfaces import TurnResponder
    from sapo_gym.pool import plan
    from sapo_gym.records import evaluation_mode

    config = config_from_args(args)
    _check_config(args.agent, config)
    _check_flags(args)
    seeds = [int(s) for s in str(args.seeds).split(",") if s.strip()]
    mode = evaluation_mode(args.mode, args.workers, args.round)  # before any env is built: a bad name fails fast
    width = max(1, config.concurrency or args.batch_size)
    envs = [gym.make(args.env, **env_kwargs) for _ in range(width)]
    agent = log = None
    try:
        probe = envs[0].unwrapped  # the first env tells the split, its tasks and the spec (nothing loads twice)
        ids = list(probe.task_ids)[: args.limit] if args.limit else list(probe.task_ids)
        spec_fields, spec_hash = probe.spec_fields(), probe.spec_hash()
        if args.bundle_out:
            _board_check(args, spec_fields, spec_hash, mode)
        agent = load_for_harness(args.agent, seed=seeds[0] if seeds else 0, process=args.agent_process, config=config)
        lockstep = None if isinstance(agent, TurnResponder) else width
        jobs = plan(ids, seeds, mode)
        log = _open_log(
            args, run_identity(args, env_kwargs, config, spec_fields, spec_hash, ids, seeds, mode, lockstep), jobs
        )
        if log is not None and log.done:
            _verify_done(log, envs[0], agent)
        records = _play(agent, envs, jobs, log, f"evaluate {args.env}")
        created = log.created if log is not None else run_created()
        _write_outputs(
            args,
            log,
            (args, records, agent, spec_fields["split"], mode, seeds, (spec_fields, spec_hash), width, created),
        )
    finally:  # the log (and its lock) is held until the outputs are written
        for env in envs:
            env.close()
        if isinstance(agent, IsolatedAgent):
            agent.close()
        if log is not None:
            log.close()
    return 0
