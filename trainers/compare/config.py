"""What one ``sapo-gym compare`` run depends on: compare's own fields, one shared :class:`TrainConfig`, presets.

:class:`CompareConfig` holds what only a comparison has (methods, seeds, GRPO's group size, the
horizon, the evaluation, where and how the runs are scheduled) and, in ``train``, the
:class:`~trainers.config.TrainConfig` every run shares. :meth:`CompareConfig.train_config` is that
TrainConfig with the per-run fields (:data:`PER_RUN`) filled in, so runs differ **only** in ``algo``
and ``seed`` (and the group methods' rollouts per task, their folders and checkpoints): same model, warm start,
prompts, horizon, episodes per iteration (equal env interactions), optimisation settings and
evaluation split. Every TrainConfig field but the per-run ones is a ``compare`` flag.

The CPU default (:func:`cpu_train`) is the README's main command: ``sapo/ALFWorld-Mini-v0`` (the CPU-scale
variant: generated games with at most 4 receptacles per room, the same engine, PDDL domain, grammar, six
categories and horizon 50; trained on its 240 train games, evaluated on its 60 held-out games in
floor plans never trained on), a random-init tiny Qwen2 (0.56 M parameters) with the project
tokenizer, short prompts (``plain``, no history), admissible-action constrained decoding sampled with 16 draft
tokens, a behaviour-cloning warm start (48 walkthrough episodes × 7 epochs at lr 1e-3: it leaves RL room on games it
has not seen) trained once and shared, then 4 seeds × 20 iterations × 8 episodes per method (rollouts at
temperature 0.7), two runs at a time, each policy evaluated 3 times (seeds 0, 1, 2) on every held-out game
(docs/compare.md has the measured run and its wall time). ``--preset vault`` is the
tiny diagnostic task; ``--preset webshop-cpu`` the same model and methods on ``sapo/WebShop-Mini-v0``; ``--preset ablation`` SAPO
against its ablations on the CPU default. The GPU presets are the recipes' training runs (GPU and real weights needed).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from trainers.config import ALGOS, GROUP_ALGOS, RESULT_NEUTRAL, TrainConfig
from trainers.method_registry import (
    METHODS,
    method_label as label,  # a method's name in tables, figures and bundles
)

__all__ = ["PER_RUN", "PRESETS", "CompareConfig", "CompareSettings", "Preset", "cpu_train", "run_key", "label"]

PER_RUN: tuple[str, ...] = ("algo", "seed", "out_dir", "resume", "checkpoint_every", "group_size", "progress")
"""TrainConfig fields :meth:`CompareConfig.train_config` sets per run (``group_size`` from ``grpo_group_size``,
``progress`` from compare's own flag): not ``compare`` flags, not part of the shared ``train``."""


ABLATION_ALGOS: tuple[str, ...] = ("sapo", *(name for name in METHODS if name.startswith("sapo-")))
"""``--preset ablation``'s methods: SAPO and every registered ablation of it (trainers/methods/sapo_ablations.py)."""


def run_key(algo: str, seed: int) -> str:
    """The name of one method/seed run (its folder, its bundle, its key in the state file)."""
    return f"{algo}-seed{seed}"


def cpu_train() -> TrainConfig:
    """The CPU default's shared TrainConfig: the trainer's defaults but for these (the tiny model's scale)."""
    return TrainConfig(
        env="sapo/ALFWorld-Mini-v0",
        env_arg=["data_dir=embedded-mini"],  # the embedded CPU-scale games
        tiny_hidden_size=128,  # ≈ 0.56 M parameters (64, 0.2 M, reaches 0 % on ALFWorld after cloning)
        iterations=20,
        episodes_per_iteration=8,
        prompt="plain",
        history_length=0,
        max_prompt_tokens=1024,
        max_response_tokens=24,
        old_log_probs="rollout",
        constrain="admissible",
        lr=3e-4,
        critic_lr=1e-3,  # the paper's 1e-6 / 1e-5 are for 1.5B/7B models; the tiny one needs larger ones
        micro_batch_size=16,
        # a clone that lands on the same held-out success on both kernel sets measured (21.1 %; 48 x 10 at 3e-3 landed
        # anywhere from 18.9 to 57.8 %), and rollouts sampled sharper than the clone (fitted at temperature 1): RL's
        # gains from it were measured larger than at 1.0 (docs/compare.md)
        sft_episodes=48,
        sft_epochs=7,
        sft_lr=1e-3,
        temperature=0.7,
        draft_tokens=16,  # speculative sampling: the same distribution, about half the generation time (docs/compare.md)
    )


@dataclass
class CompareSettings:
    """A controlled comparison: methods × seeds under identical settings and budget."""

    RESULT_NEUTRAL: ClassVar[tuple[str, ...]] = ("out", "max_runs", "seeds", "progress", "eval_batch_size", "workers")
    """Compare's fields that say where, how far and how fast a comparison goes, not its runs' numbers (each run is
    seeded on its own, so ``--seeds 7`` on a finished 4-seed folder trains seeds 4-6 and reports all seven):
    :meth:`CompareConfig.fingerprint` leaves them out, with TrainConfig's (:data:`trainers.config.RESULT_NEUTRAL`)."""

    # ------------------------------------------------------------------ what is compared
    algos: str = "sapo,ppo,grpo"
    """Comma-separated methods to compare (any of {method_names})."""
    seeds: int = 4
    """Seeds per method (0..seeds-1): RL sampling, minibatch order and task schedule; the warm start is shared. (4: at 3
    the 95 % t quantile is 4.30 and one weak seed leaves every gain's interval wide; at 4 it is 3.18.)"""
    grpo_group_size: int = 4
    """Rollouts per task G of the group methods ({group_methods}; paper: 8); the others play one rollout per task
    (every method plays the same episodes per iteration)."""
    horizon: int = 0
    """Maximum turns per episode, training and evaluation (0 = the env's registered horizon, the paper's:
    ALFWorld 50, WebShop 15; another value changes the spec hash, so a board will not host those bundles)."""
    # ------------------------------------------------------------------ where and how the runs go
    out: str = "runs/compare"
    """Output folder: results.md/json, plots/, bundles/, runs/<algo>-seed<k>/, warm_start/, state.json."""
    max_runs: int = 0
    """Run at most this many method/seed runs in this invocation, then stop (0 = all); rerun to continue."""
    progress: bool = True
    """Show progress bars (overall runs with ETA, and each run's iterations)."""
    workers: int = 2
    """Method/seed runs trained at the same time, each in its own process (one torch thread each under
    OMP_NUM_THREADS=1): 2 on a 2-core machine halves the wall time; every run's numbers are the same as
    with 1 (each run is seeded on its own; tested). Each run is one process: compare launches no
    multi-process (torchrun) runs."""
    # ------------------------------------------------------------------ evaluation (identical for all)
    eval_split: str = ""
    """Split evaluated after training and for the warm start ('' = the env's first leaderboard split, e.g. Vault
    'test', ALFWorld 'eval_out_of_distribution'; else the env's default)."""
    eval_seeds: str = "0,1,2"
    """Comma-separated evaluation seeds (one pass over the split each)."""
    warm_start_eval_seeds: str = ""
    """Evaluation seeds of the shared warm start ('' = ``eval_seeds``; it must list every evaluation seed). The warm
    start's evaluation noise enters every method's gain, and it is one policy: evaluating it on more seeds narrows
    every gain's interval for the cost of one policy's evaluation, not one per run. The seeds beyond ``eval_seeds``
    are evaluated in a second process (with ``workers`` > 1) while ``eval_seeds`` are, as every run is evaluated."""
    eval_tasks: int = 0
    """Evaluate only the first N tasks of the split (0 = all; a board admits only bundles of the whole split)."""
    eval_batch_size: int = 60
    """Envs stepped together during evaluation."""
    value_episodes: int = 0
    """Held-out episodes each run plays after training at the training temperature (the evaluation split's tasks,
    the same for every run), on which its V and Q (SAPO's readout, its ablations', PPO's critic) are scored against
    the turns' Monte-Carlo returns, beside the policy's KL from the warm start (0 = none; trainers/held_out_values.py)."""
    eval_every: int = 10
    """Also evaluate each run every N iterations, on the first evaluation seed, for the held-out learning curve
    (0 = only after training; the training RNG is restored after each, so a run's numbers do not change). 10: with
    the CPU default's 4 seeds, every 5 iterations put `make run` at 16 minutes on a 2-core Xeon."""


@dataclass
class CompareConfig(CompareSettings):
    """:class:`CompareSettings` (compare's own fields, each a flag) plus the TrainConfig every run shares."""

    train: TrainConfig = field(default_factory=cpu_train)
    """The settings every run shares (model, env, budget, prompts, optimisation, warm start, ...); its per-run
    fields (:data:`PER_RUN`) are ignored: :meth:`train_config` sets them."""

    def __post_init__(self) -> None:
        unknown = [a for a in self.algo_list if a not in ALGOS]
        if unknown or not self.algo_list:
            raise ValueError(f"unknown algos {unknown or self.algos!r}; valid choices: {list(ALGOS)}")
        if self.seeds < 1 or self.train.iterations < 1 or self.horizon < 0:
            raise ValueError("seeds and iterations must be >= 1, horizon >= 0")
        if set(GROUP_ALGOS) & set(self.algo_list) and self.train.episodes_per_iteration % self.grpo_group_size:
            raise ValueError(
                f"episodes_per_iteration ({self.train.episodes_per_iteration}) must be a multiple of grpo_group_size "
                f"({self.grpo_group_size}): every method plays the same number of episodes per iteration"
            )
        if self.workers < 1:
            raise ValueError("workers must be >= 1")
        if self.train.strategy == "deepspeed" and self.workers > 1:
            raise ValueError(
                "strategy 'deepspeed' needs workers 1: each run is a DeepSpeed world of one process, and "
                "concurrent runs would share its rendezvous port"
            )
        if not self.eval_seed_list:
            raise ValueError("eval_seeds must list at least one seed")
        missing = sorted(set(self.eval_seed_list) - set(self.warm_start_seed_list))
        if missing:
            raise ValueError(
                f"warm_start_eval_seeds must list every evaluation seed (the warm start is measured where "
                f"each run is); missing {missing}"
            )

    def replace(self, **changes: Any) -> CompareConfig:
        """A copy with ``changes``: compare's fields by name, TrainConfig fields by name into ``train``
        (``train=`` first replaces the whole shared TrainConfig; the per-run fields are refused)."""
        own = {f.name for f in dataclasses.fields(self)}
        shared = {f.name for f in dataclasses.fields(TrainConfig)} - set(PER_RUN)
        wrong = sorted(set(changes) - own - shared)
        if wrong:
            raise TypeError(
                f"not a CompareConfig field nor a shared TrainConfig field: {wrong} "
                f"(set per run by train_config: {list(PER_RUN)})"
            )
        mine = {k: v for k, v in changes.items() if k in own}
        train = dataclasses.replace(mine.pop("train", self.train), **{k: v for k, v in changes.items() if k not in own})
        return dataclasses.replace(self, **mine, train=train)

    @property
    def algo_list(self) -> list[str]:
        return [a.strip() for a in self.algos.split(",") if a.strip()]

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.seeds))

    @property
    def eval_seed_list(self) -> list[int]:
        return [int(s) for s in self.eval_seeds.split(",") if s.strip()]

    @property
    def resolved_eval_split(self) -> str | None:
        """The evaluation split: ``eval_split``, else the env's first registered evaluation split, else None (env default)."""
        from sapo_gym.registration import ENVS

        entry = ENVS.get(self.train.env)
        return self.eval_split or (entry.eval_splits[0] if entry is not None and entry.eval_splits else None)

    @property
    def warm_start_seed_list(self) -> list[int]:
        """The warm start's evaluation seeds: ``warm_start_eval_seeds``, else ``eval_seeds``; each once, in order."""
        seeds = [int(s) for s in self.warm_start_eval_seeds.split(",") if s.strip()] or self.eval_seed_list
        return list(dict.fromkeys(seeds))

    @property
    def warm_start_extra_seeds(self) -> list[int]:
        """The warm start's evaluation seeds that the runs are not evaluated on."""
        return [s for s in self.warm_start_seed_list if s not in self.eval_seed_list]

    def runs(self) -> list[tuple[str, int]]:
        """Every (algo, seed) pair, seed-major so an early stop still has every method at seed 0."""
        return [(algo, seed) for seed in self.seed_list for algo in self.algo_list]

    def train_config(self, algo: str, seed: int, model: str | None = None) -> TrainConfig:
        """The :class:`TrainConfig` of one run: ``train`` with the per-run fields; runs differ only in ``algo`` and ``seed``."""
        horizon = [f"max_episode_steps={self.horizon}"] if self.horizon else []
        return dataclasses.replace(
            self.train,
            algo=algo,
            seed=seed,
            model=model or self.train.model,
            out_dir=f"{self.out}/runs/{run_key(algo, seed)}",
            resume=True,
            checkpoint_every=1,
            group_size=self.grpo_group_size if algo in GROUP_ALGOS else 1,
            env_arg=[*self.train.env_arg, *horizon],
            progress=self.progress,
        )

    def as_dict(self) -> dict[str, Any]:
        """Flat: the shared TrainConfig fields (per-run ones left out), then compare's (results.json's ``config``)."""
        train = {k: v for k, v in dataclasses.asdict(self.train).items() if k not in PER_RUN}
        return {**train, **{k: v for k, v in dataclasses.asdict(self).items() if k != "train"}}

    def fingerprint(self) -> str:
        """Hash of every field that changes results (a resumed compare must match it): compare's fields and the
        runs' TrainConfig, the trainer's defaults this config does not set included (a code change of, e.g., c_V
        is another comparison), less where, how fast and how visibly runs go (:attr:`RESULT_NEUTRAL` and
        :data:`trainers.config.RESULT_NEUTRAL`) and the per-run fields (:data:`PER_RUN`)."""
        fields = {k: v for k, v in dataclasses.asdict(self).items() if k not in self.RESULT_NEUTRAL and k != "train"}
        per_run = {*PER_RUN, *RESULT_NEUTRAL}
        train = {k: v for k, v in dataclasses.asdict(self.train_config("sapo", 0)).items() if k not in per_run}
        return hashlib.sha256(json.dumps({"compare": fields, "train": train}, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Preset:
    """A named set of overrides (``--preset NAME``): compare's fields and shared TrainConfig fields by name;
    a leading ``("train", TrainConfig())`` starts from the trainer's defaults instead of the CPU ones."""

    name: str
    description: str
    needs_gpu: bool
    overrides: tuple[tuple[str, Any], ...]

    def apply(self, cfg: CompareConfig) -> CompareConfig:
        return cfg.replace(**copy.deepcopy(dict(self.overrides)))  # a copy: no run mutates the preset's lists


def _paper(model: str, micro_batch_size: int) -> tuple[tuple[str, Any], ...]:
    """``GENERATOR=vllm recipes/paper.sh SIZE alfworld ALGO --bf16`` (one process: compare launches no torchrun
    runs, so no ``--strategy deepspeed``), from the trainer's defaults as the recipe's flags; a test checks it."""
    return (
        ("train", TrainConfig()),
        ("env", "sapo/ALFWorld-v0"),
        ("env_arg", []),
        ("model", model),
        ("device", "cuda"),
        ("iterations", 150),
        ("episodes_per_iteration", 128),
        ("lr", 1e-6),
        ("kl_coef", 0.01),
        ("clip_eps", 0.2),
        ("c_inv", 0.1),
        ("history_length", 2),
        ("max_prompt_tokens", 2048),
        ("max_response_tokens", 512),
        ("temperature", 1.0),
        ("eval_temperature", 0.4),
        ("ppo_epochs", 1),
        ("micro_batch_size", micro_batch_size),
        ("bf16", True),
        ("generator", "vllm"),
        # compare's own: the paper's Table 1 methods (SAPO against PPO, GRPO, RLOO and GiGPO), the group methods'
        # G = 8, the registered horizon, 3 seeds, one run at a time (one GPU), one eval pass
        ("algos", "sapo,ppo,grpo,gigpo,rloo"),
        ("grpo_group_size", 8),
        ("horizon", 0),
        ("seeds", 3),
        ("workers", 1),
        ("eval_seeds", "0"),
        ("eval_batch_size", 32),
    )


def _smollm2() -> tuple[tuple[str, Any], ...]:
    """``recipes/smollm2_one_gpu.sh ALGO alfworld`` (HF generation, float32, as the recipe), from the trainer's defaults."""
    return (
        ("train", TrainConfig()),
        ("env", "sapo/ALFWorld-v0"),
        ("model", "smollm2"),
        ("device", "cuda"),
        ("iterations", 100),
        ("episodes_per_iteration", 64),
        ("lr", 1e-6),
        ("kl_coef", 0.01),
        ("clip_eps", 0.2),
        ("c_inv", 0.1),
        ("history_length", 2),
        ("max_prompt_tokens", 2048),
        ("max_response_tokens", 512),
        ("temperature", 1.0),
        ("eval_temperature", 0.4),
        ("micro_batch_size", 8),
        ("sft_episodes", 64),
        ("sft_agent", "expert"),
        ("grpo_group_size", 8),
        ("horizon", 0),
        ("seeds", 3),
        ("workers", 1),
        ("eval_seeds", "0"),
        ("eval_batch_size", 32),
    )


_PAPER_RUN = (
    "bf16 autocast, rollouts by a colocated vLLM engine (--generator vllm); one process per run on one GPU: "
    "compare launches no multi-process runs, so not the paper's 4-GPU --strategy deepspeed "
    "(recipes/paper.sh with NPROC=4 is)"
)

PRESETS: dict[str, Preset] = {
    "cpu": Preset(
        "cpu",
        "the CPU default: embedded ALFWorld, tiny model, shared behaviour-cloning warm start, ≤ 15 min on 2 cores",
        False,
        (),
    ),
    "vault": Preset(
        "vault",
        "the diagnostic sapo/Vault-v0 task (sparse reward, horizon 4), where RL visibly lifts a weak warm start in ~5 min",
        False,
        (
            ("env", "sapo/Vault-v0"),
            ("env_arg", []),
            ("tiny_hidden_size", 64),
            ("seeds", 3),
            ("iterations", 60),
            ("episodes_per_iteration", 16),
            ("max_response_tokens", 24),
            ("lr", 3e-4),
            ("sft_episodes", 32),
            ("sft_epochs", 50),
            ("sft_lr", 3e-3),
            ("temperature", 1.0),
            ("eval_every", 5),
            ("eval_seeds", "0,1,2,3"),
            ("constrain", "admissible"),
            ("old_log_probs", "recompute"),
            ("eval_batch_size", 16),
            ("draft_tokens", 0),
        ),
    ),
    "webshop-cpu": Preset(
        "webshop-cpu",
        "WebShop on CPU: sapo/WebShop-Mini-v0 (200 generated products, 100 held-out goals), the CPU "
        "default's tiny model and warm start; the model writes its own queries",
        False,
        (
            ("env", "sapo/WebShop-Mini-v0"),
            ("env_arg", []),
            ("history_length", 1),
            ("max_response_tokens", 40),
            ("sft_episodes", 150),
            ("episodes_per_iteration", 16),
            ("eval_every", 10),
            # the warm start, sampling and seeds it was measured with (the CPU default's before the 7-epoch clone)
            ("sft_epochs", 10),
            ("sft_lr", 3e-3),
            ("temperature", 1.0),
            ("seeds", 3),
            ("draft_tokens", 0),
            # a turn runs from ~70 tokens (search page) to ~930 (results page): 4-turn micro-batches by length pad far less
            ("micro_batch_size", 4),
            ("group_by_length", True),
            # the shared start measured on 1,000 episodes (the runs on 300): its noise was most of each gain's interval
            ("warm_start_eval_seeds", "0,1,2,3,4,5,6,7,8,9"),
        ),
    ),
    "ablation": Preset(
        "ablation",
        "SAPO's ablation matrix on the CPU default (embedded ALFWorld): without the Q loss, without batch "
        "normalization, A = Q - V, three readout temperatures, and a linear head in place of the vocabulary readout; "
        "each run's V and Q scored on 32 held-out episodes",
        False,
        (("algos", ",".join(ABLATION_ALGOS)), ("seeds", 4), ("value_episodes", 32), ("out", "runs/ablation")),
    ),
    "collapse": Preset(
        "collapse",
        "where group baselines lose their signal: the CPU default from a weaker warm start (5 clone epochs, "
        "about 1 in 10 held-out games won), GRPO at the paper's G = 8 against SAPO's one rollout per task, 16 episodes an "
        "iteration each",
        False,
        (
            ("algos", "sapo,grpo"),
            ("grpo_group_size", 8),
            ("episodes_per_iteration", 16),
            ("sft_epochs", 5),
            ("seeds", 4),
            ("out", "runs/collapse"),
        ),
    ),
    "paper-1.5b": Preset(
        "paper-1.5b",
        "the paper's setting with Qwen2.5-1.5B-Instruct, Table 1's five methods (recipes/paper.sh: "
        f"lr 1e-6, KL 0.01, 150 iterations × 128 episodes; {_PAPER_RUN})",
        True,
        _paper("Qwen/Qwen2.5-1.5B-Instruct", 16),
    ),
    "paper-7b": Preset(
        "paper-7b",
        "the paper's setting with Qwen2.5-7B-Instruct, Table 1's five methods (recipes/paper.sh: "
        f"lr 1e-6, KL 0.01, 150 iterations × 128 episodes; {_PAPER_RUN})",
        True,
        _paper("Qwen/Qwen2.5-7B-Instruct", 4),
    ),
    "smollm2-1gpu": Preset(
        "smollm2-1gpu",
        "SmolLM2-135M-Instruct (offline wheel) on one GPU: recipes/smollm2_one_gpu.sh's settings "
        "(HF generation, float32, expert warm start)",
        True,
        _smollm2(),
    ),
}
"""``--preset`` choices. The GPU presets keep the env's registered horizon (ALFWorld 50, WebShop 15)."""
