"""Run a comparison: one shared warm start, then every method × seed, each evaluated the same way.

Layout of ``cfg.out``::

    state.json               config fingerprint + finished runs (what a rerun skips)
    warm_start/              the behaviour-cloned policy (HF format) + result.json (its evaluation)
    runs/<algo>-seed<k>/     the trainer's metrics.jsonl and checkpoints, result.json
    bundles/<algo>-seed<k>.json   one leaderboard result bundle per run (and warm-start.json)

A killed compare continues where it stopped: finished runs are skipped (the state file says which),
and the run that was interrupted resumes from its last checkpoint (one per iteration). Every piece
is built from the trainer's own parts (:class:`trainers.loop.Trainer`, :mod:`trainers.sft`,
:func:`sapo_gym.evaluation.evaluate`, :func:`sapo_gym.bundle.build_bundle`).
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainers.compare.config import CompareConfig, label, run_key

__all__ = [
    "CompareState",
    "RunResult",
    "evaluate_policy",
    "first_seed_success",
    "held_out_curve",
    "prepare_warm_start",
    "read_result",
    "run_compare",
    "run_one",
]


def _write_json(path: Path, obj: Any) -> None:
    """Atomic write (:func:`sapo_gym.files.write_atomic`): a kill never leaves half a file behind."""
    from sapo_gym.files import write_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(obj, indent=1, allow_nan=False).encode())


@dataclass
class CompareState:
    """``state.json``: which config this folder belongs to and which runs are finished."""

    fingerprint: str
    warm_start_done: bool = False
    finished: list[str] = field(default_factory=list)

    @classmethod
    def open(cls, cfg: CompareConfig) -> CompareState:
        """The folder's state, or a fresh one; refuses a folder that holds another comparison."""
        path = Path(cfg.out) / "state.json"
        if not path.exists():
            return cls(cfg.fingerprint())
        state = cls(**json.loads(path.read_text()))
        if state.fingerprint != cfg.fingerprint():
            raise ValueError(
                f"{cfg.out} holds a comparison with other settings (fingerprint {state.fingerprint}, "
                f"now {cfg.fingerprint()}); use another --out or delete that folder"
            )
        return state

    def save(self, cfg: CompareConfig) -> None:
        _write_json(Path(cfg.out) / "state.json", dataclasses.asdict(self))


@dataclass
class RunResult:
    """What one run (or the warm start) left behind, as stored in its ``result.json``."""

    name: str
    algo: str | None
    seed: int | None
    summary: dict[str, dict[str, float]]
    """:func:`sapo_gym.evaluation.summarize` of the evaluation (per category and ``all``)."""
    metrics: list[dict[str, Any]]
    """The trainer's per-iteration rows (empty for the warm start)."""
    train_s: float
    eval_s: float
    bundle: str
    extra: dict[str, Any] = field(default_factory=dict)


def read_result(path: Path) -> RunResult:
    return RunResult(**json.loads(path.read_text()))


SAMPLING_SEED = 12345
"""torch's seed at the start of every evaluation call (common random numbers: every policy draws the same stream)."""


def evaluate_policy(
    policy: Any,
    tcfg: Any,
    cfg: CompareConfig,
    env_kwargs: dict[str, Any],
    seeds: list[int] | None = None,
    sampling_seed: int = SAMPLING_SEED,
) -> list[Any]:
    """Every task of the evaluation split, at the evaluation temperature, with the same sampling seed for all.

    ``seeds``: the evaluation seeds (default: all of ``cfg.eval_seed_list``), played in one call, so each draws
    its own part of the one stream. An env that ignores the seed (WebShop: the goal is the task) plays the same
    episodes again in a call of its own with the same ``sampling_seed``: a separate call needs its own."""
    import torch

    from sapo_gym.evaluation import evaluate
    from trainers.agent_boundary import build_agent

    task_ids = None
    if cfg.eval_tasks:
        import gymnasium as gym

        probe = gym.make(cfg.train.env, **_eval_kwargs(cfg, env_kwargs))
        task_ids = list(probe.unwrapped.task_ids)[: cfg.eval_tasks]
        probe.close()
    torch.manual_seed(sampling_seed)  # common random numbers: every policy is evaluated under the same sampling seed
    agent = build_agent(policy, tcfg, tcfg.eval_temperature)
    with torch.no_grad():
        return evaluate(
            agent,
            cfg.train.env,
            split=cfg.resolved_eval_split,
            task_ids=task_ids,
            seeds=seeds or cfg.eval_seed_list,
            batch_size=cfg.eval_batch_size,
            env_kwargs=env_kwargs,
            progress=cfg.progress,
        )


def first_seed_success(records: list[Any], cfg: CompareConfig) -> float:
    """Held-out success on the first evaluation seed only: the points of the held-out learning curve."""
    mine = [r for r in records if r.seed == cfg.eval_seed_list[0]]
    return sum(r.success for r in mine) / max(1, len(mine))


def held_out_curve(cfg: CompareConfig, env_kwargs: dict[str, Any]) -> Any:
    """``Trainer.train``'s ``after_iteration``: every ``cfg.eval_every`` iterations (not the last, which the
    final evaluation scores), ``eval/success`` on the first evaluation seed.

    The evaluation seeds torch's RNG itself (common random numbers), so every RNG the training draws
    from is saved before and restored after it: a run's rollouts and updates are the same with or
    without these evaluations (tested)."""
    import random

    import numpy as np
    import torch

    def after_iteration(trainer: Any) -> dict[str, float]:
        if not cfg.eval_every or trainer.iteration % cfg.eval_every or trainer.iteration >= cfg.train.iterations:
            return {}
        py, npy = random.getstate(), np.random.get_state()
        with torch.random.fork_rng(devices=[]):
            records = evaluate_policy(
                trainer.policy,
                trainer.cfg,
                dataclasses.replace(cfg, progress=False),
                env_kwargs,
                seeds=cfg.eval_seed_list[:1],
            )
        random.setstate(py)
        np.random.set_state(npy)
        return {"eval/success": first_seed_success(records, cfg)}

    return after_iteration


def _eval_kwargs(cfg: CompareConfig, env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The env kwargs of the evaluation split."""
    split = cfg.resolved_eval_split
    return {**env_kwargs, **({"split": split} if split else {})}


def _write_bundle(
    cfg: CompareConfig,
    name: str,
    records: list[Any],
    env_kwargs: dict[str, Any],
    policy: Any,
    algo: str | None,
    budget: str,
    seeds: list[int] | None = None,
) -> str:
    """One leaderboard result bundle for ``records`` (env spec and hash probed with the same kwargs)."""
    import gymnasium as gym

    from sapo_gym.bundle import AgentInfo, build_bundle

    probe = gym.make(cfg.train.env, **_eval_kwargs(cfg, env_kwargs))
    spec_fields, spec_hash = probe.unwrapped.spec_fields(), probe.unwrapped.spec_hash()
    probe.close()
    params = sum(p.numel() for p in policy.model.parameters())
    agent = AgentInfo(
        name=f"{name} {Path(cfg.train.model).name or cfg.train.model} (sapo-gym compare)",
        model=cfg.train.model,
        parameters=int(params),
        algorithm=label(algo) if algo else "behaviour cloning",
        training_budget=budget,
        description=f"sapo-gym compare run {name}; config fingerprint {cfg.fingerprint()}",
        decoding=cfg.train.constrain,
    )
    command = (
        "sapo-gym " + shlex.join(sys.argv[1:])
        if sys.argv and sys.argv[0].endswith(("sapo-gym", "__main__.py"))
        else None
    )
    bundle = build_bundle(
        records, spec_fields, spec_hash, agent, seeds or cfg.eval_seed_list, cfg.eval_batch_size, command
    )
    path = Path(cfg.out) / "bundles" / f"{name}.json"
    _write_json(path, bundle)
    return str(path)


def _evaluate_saved(cfg: CompareConfig, tcfg: Any, model_path: str, seed: int) -> list[Any]:
    """The policy saved at ``model_path`` evaluated on ``seed`` alone, in whichever process calls it (the same
    numbers), under a sampling stream of the seed's own: the runs' call (``eval_seeds`` together) starts at
    :data:`SAMPLING_SEED`, so ``SAMPLING_SEED + 1 + seed`` is none of its streams' starts."""
    from trainers.agent_boundary import build_policy

    policy = build_policy(dataclasses.replace(tcfg, model=model_path))
    policy.model.to(tcfg.device)
    return evaluate_policy(policy, tcfg, cfg, tcfg.gym_make_kwargs(), [seed], SAMPLING_SEED + 1 + seed)


def _start_extra_evaluation(cfg: CompareConfig, tcfg: Any, model_path: str) -> Any:
    """Start the warm start's evaluation on :attr:`CompareConfig.warm_start_extra_seeds`, one seed per call (so the
    numbers do not depend on which process plays it): with ``workers`` > 1 a second process starts on them at once,
    beside the evaluation on the runs' seeds, on the core the runs have not taken yet. Returns a callable that plays
    in this process the seeds not yet started and returns every extra seed's records, in seed order."""
    seeds = cfg.warm_start_extra_seeds
    if cfg.workers == 1 or not seeds:
        return lambda: [r for seed in seeds for r in _evaluate_saved(cfg, tcfg, model_path, seed)]
    pool = _spawn_pool(1)
    quiet = dataclasses.replace(cfg, progress=False)
    jobs = [pool.submit(_evaluate_saved, quiet, tcfg, model_path, seed) for seed in seeds]

    def wait() -> list[Any]:
        try:
            here = {}
            for i in reversed(range(len(jobs))):  # the seeds the second process has not started, from the last one back
                if jobs[i].cancel():
                    here[i] = _evaluate_saved(quiet, tcfg, model_path, seeds[i])
            return [r for i, job in enumerate(jobs) for r in (here[i] if i in here else job.result())]
        finally:
            pool.shutdown()

    return wait


def _warm_start_budget(cfg: CompareConfig, readout: dict[str, Any] | None) -> str:
    """The warm start's training budget, as its result bundle states it."""
    budget = (
        f"behaviour cloning on {cfg.train.sft_episodes} {cfg.train.sft_agent} episodes x {cfg.train.sft_epochs} epochs"
        if cfg.train.sft_episodes
        else "none (base model)"
    )
    if readout:
        budget += f"; SAPO's readout fitted on the returns of {readout['turns']} turns of its own rollouts"
    return budget


def prepare_warm_start(cfg: CompareConfig, state: CompareState) -> tuple[str, RunResult]:
    """The shared starting policy (trained once, cached in ``warm_start/``) and its evaluation.

    Returns the model path every run starts from (the base model itself when there is no warm start
    and the base model is not a seeded random init).
    """
    from sapo_gym.evaluation import summarize
    from trainers.loop import Trainer
    from trainers.readout_warmup import readout_warm_start
    from trainers.sft import warm_start

    folder = Path(cfg.out) / "warm_start"
    # 'tiny' is a seeded random init: save it too, so that every seed starts from the same weights
    saved = cfg.train.sft_episodes > 0 or cfg.train.readout_warmup_episodes > 0 or cfg.train.model == "tiny"
    model_path = str(folder / "policy") if saved else cfg.train.model
    if state.warm_start_done and (folder / "result.json").exists():
        return model_path, read_result(folder / "result.json")
    # the warm start trains (and saves) the full model: LoRA adapters belong to the runs that start from it
    tcfg = dataclasses.replace(cfg.train_config("sapo", 0), out_dir=str(folder), resume=False, lora_rank=0)
    trainer = Trainer(tcfg)
    t0, losses = time.perf_counter(), []
    if cfg.train.sft_episodes > 0:
        losses = warm_start(trainer.policy, tcfg, tcfg.gym_make_kwargs())
    readout = readout_warm_start(trainer) if trainer.fits_readout else None  # shared: every method starts from it
    if saved:
        trainer.policy.save_pretrained(model_path)
    train_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    extra = _start_extra_evaluation(cfg, tcfg, model_path)
    records = evaluate_policy(trainer.policy, tcfg, cfg, tcfg.gym_make_kwargs())  # as every run is evaluated
    records += extra()
    eval_s = time.perf_counter() - t0
    budget = _warm_start_budget(cfg, readout)
    bundle = _write_bundle(
        cfg, "warm-start", records, tcfg.gym_make_kwargs(), trainer.policy, None, budget, cfg.warm_start_seed_list
    )
    trainer.vec.close()
    result = RunResult(
        "warm-start",
        None,
        None,
        summarize(records),
        [],
        train_s,
        eval_s,
        bundle,
        {
            "sft_loss": losses,
            "first_seed_success": first_seed_success(records, cfg),
            **({"readout_warmup": readout} if readout else {}),
        },
    )
    _write_json(folder / "result.json", dataclasses.asdict(result))
    state.warm_start_done = True
    state.save(cfg)
    return model_path, result


def run_one(cfg: CompareConfig, algo: str, seed: int, model_path: str) -> RunResult:
    """Train one method/seed from the shared start (resuming its own checkpoint), evaluate, bundle."""
    from sapo_gym.evaluation import summarize
    from trainers.loop import Trainer
    from trainers.metrics import read_metrics

    name = run_key(algo, seed)
    tcfg = dataclasses.replace(
        cfg.train_config(algo, seed), model=model_path, sft_episodes=0, readout_warmup_episodes=0
    )
    trainer = Trainer(tcfg)
    t0 = time.perf_counter()
    trainer.train(after_iteration=held_out_curve(cfg, tcfg.gym_make_kwargs()))
    train_s = time.perf_counter() - t0
    trainer.vec.close()
    t0 = time.perf_counter()
    records = evaluate_policy(trainer.policy, tcfg, cfg, tcfg.gym_make_kwargs())
    eval_s = time.perf_counter() - t0
    budget = (
        f"{cfg.train.iterations} iterations x {cfg.train.episodes_per_iteration} episodes (horizon {cfg.horizon or 'as registered'})"
        + (
            f" after behaviour cloning on {cfg.train.sft_episodes} {cfg.train.sft_agent} episodes"
            if cfg.train.sft_episodes
            else ""
        )
    )
    bundle = _write_bundle(cfg, name, records, tcfg.gym_make_kwargs(), trainer.policy, algo, budget)
    metrics = read_metrics(Path(tcfg.out_dir) / "metrics.jsonl")
    extra = {"first_seed_success": first_seed_success(records, cfg), **_held_out_values(cfg, trainer, model_path)}
    result = RunResult(name, algo, seed, summarize(records), metrics, train_s, eval_s, bundle, extra)
    _write_json(Path(tcfg.out_dir) / "result.json", dataclasses.asdict(result))
    return result


def _held_out_values(cfg: CompareConfig, trainer: Any, model_path: str) -> dict[str, Any]:
    """``held_out_values`` (and the seconds they took) when ``cfg.value_episodes``: the trained run's V and Q on
    held-out episodes and its KL from the warm start it began at (:func:`trainers.held_out_values.held_out_values`)."""
    if not cfg.value_episodes:
        return {}
    from trainers.agent_boundary import build_policy
    from trainers.held_out_values import held_out_values

    t0 = time.perf_counter()
    start = build_policy(dataclasses.replace(trainer.cfg, model=model_path)).model.to(trainer.device).eval()
    values = held_out_values(trainer, cfg.resolved_eval_split, cfg.value_episodes, reference=start)
    return {"held_out_values": values, "held_out_values_s": time.perf_counter() - t0}


def _progress(total: int, done: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, initial=done, desc="compare", unit="run", disable=not enabled, position=0, leave=True)


def _pending(cfg: CompareConfig, state: CompareState) -> list[tuple[str, int]]:
    """The runs still to train in this invocation (``cfg.max_runs`` of them at most), in :meth:`CompareConfig.runs` order."""
    todo = [(a, s) for a, s in cfg.runs() if run_key(a, s) not in state.finished]
    return todo[: cfg.max_runs] if cfg.max_runs else todo


def _die_with_parent() -> None:
    """Worker initializer: on Linux, the kernel ends the worker when the compare process dies (a killed
    compare must not leave runs training in the background); elsewhere nothing."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _spawn_pool(workers: int) -> Any:
    """A pool of ``workers`` spawned processes (each a clean interpreter, as a resumed run is) that die with this one."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_die_with_parent)


def _run_in_worker(cfg: CompareConfig, algo: str, seed: int, model_path: str) -> str:
    """One run in a worker process (no per-iteration bar: several runs share the terminal)."""
    run_one(dataclasses.replace(cfg, progress=False), algo, seed, model_path)
    return run_key(algo, seed)


def run_compare(cfg: CompareConfig) -> tuple[RunResult, list[RunResult], bool]:
    """Warm start once, then every pending run; returns (warm start, finished runs, complete?).

    Stops early after ``cfg.max_runs`` new runs (0 = no limit); a rerun with the same config
    skips what is finished. With ``cfg.workers > 1`` that many runs train at once in separate
    processes (spawned, so each starts from a clean interpreter, as a resumed run does).
    """
    Path(cfg.out).mkdir(parents=True, exist_ok=True)
    state = CompareState.open(cfg)
    state.save(cfg)
    model_path, start = prepare_warm_start(cfg, state)
    runs, pending = cfg.runs(), _pending(cfg, state)
    bar = _progress(len(runs), sum(run_key(*r) in state.finished for r in runs), cfg.progress)

    def finished(key: str) -> None:
        state.finished.append(key)
        state.save(cfg)
        bar.update(1)

    try:
        if cfg.workers == 1:
            for algo, seed in pending:
                bar.set_postfix_str(run_key(algo, seed))
                run_one(cfg, algo, seed, model_path)
                finished(run_key(algo, seed))
        else:
            from concurrent.futures import as_completed

            with _spawn_pool(cfg.workers) as pool:
                jobs = [pool.submit(_run_in_worker, cfg, algo, seed, model_path) for algo, seed in pending]
                for job in as_completed(jobs):
                    finished(job.result())
    finally:
        bar.close()
    results = [
        read_result(Path(cfg.out) / "runs" / run_key(a, s) / "result.json")
        for a, s in runs
        if run_key(a, s) in state.finished
    ]
    return start, results, len(results) == len(runs)
