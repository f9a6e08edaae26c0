"""What one ``sapo-gym compare`` run depends on: a dataclass (docstring per field → ``--help``) and presets.

Everything a method/seed run needs comes from :meth:`CompareConfig.train_config`, which differs
between runs **only** in ``algo`` and ``seed``: same model, warm start, prompts, horizon, episodes
per iteration (equal env interactions), optimisation settings and evaluation split.

The CPU default is the README's main command: ``sapo/ALFWorld-Mini-v0`` (the CPU-scale variant:
generated games with at most 4 receptacles per room, the same engine, PDDL domain, grammar, six
categories and horizon 50; trained on its 240 train games, evaluated on its 60 held-out games in
floor plans never trained on), a random-init tiny Qwen2 (0.56 M parameters) with the project
tokenizer, short prompts (``plain``, no history), admissible-action constrained decoding, a
behaviour-cloning warm start (48 walkthrough episodes × 10 epochs: it leaves RL room on games it has
not seen) trained once and shared, then 3 seeds × 20 iterations × 8 episodes per method, two runs at a
time, each policy evaluated 3 times (seeds 0, 1, 2) on every held-out game: about 12 minutes on two cores (docs/compare.md has the measured run). ``--preset vault`` is the
tiny diagnostic task. The presets launch the paper-scale settings (GPU and real weights needed).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from trainers.config import ALGOS, TrainConfig

__all__ = ["PRESETS", "CompareConfig", "Preset", "run_key"]


def run_key(algo: str, seed: int) -> str:
    """The name of one method/seed run (its folder, its bundle, its key in the state file)."""
    return f"{algo}-seed{seed}"


@dataclass
class CompareConfig:
    """A controlled comparison: methods × seeds under identical settings and budget."""

    # ------------------------------------------------------------------ what is compared
    env: str = "sapo/ALFWorld-Mini-v0"
    """Registered env id every method trains and is evaluated on."""
    env_arg: list[str] = field(default_factory=lambda: ["data_dir=embedded-mini"])
    """Extra env keyword argument as KEY=VALUE, passed to training and evaluation envs alike (repeatable)."""
    algos: str = "sapo,ppo,grpo"
    """Comma-separated methods to compare (any of sapo, ppo, grpo)."""
    seeds: int = 3
    """Seeds per method (0..seeds-1): RL sampling, minibatch order and task schedule; the warm start is shared."""
    model: str = "tiny"
    """Base policy: 'tiny' (random-init tiny Qwen2 + the project tokenizer), 'smollm2', or an HF model path/cached id."""
    tiny_hidden_size: int = 128
    """Hidden size of the 'tiny' model (multiple of 64): 128 ≈ 0.56 M parameters (64, 0.2 M, reaches 0 % on ALFWorld after cloning)."""
    tiny_layers: int = 2
    """Layers of the 'tiny' model."""
    out: str = "runs/compare"
    """Output folder: results.md/json, plots/, bundles/, runs/<algo>-seed<k>/, warm_start/, state.json."""
    device: str = "cpu"
    """Torch device of every model."""
    max_runs: int = 0
    """Run at most this many method/seed runs in this invocation, then stop (0 = all); rerun to continue."""
    progress: bool = True
    """Show progress bars (overall runs with ETA, and each run's iterations)."""
    workers: int = 2
    """Method/seed runs trained at the same time, each in its own process (one torch thread each under
    OMP_NUM_THREADS=1): 2 on a 2-core machine halves the wall time; every run's numbers are the same as
    with 1 (each run is seeded on its own; tested)."""
    # ------------------------------------------------------------------ budget (equal for every method)
    iterations: int = 20
    """RL iterations per run (paper: 150)."""
    episodes_per_iteration: int = 8
    """Env episodes per iteration, the same for every method (GRPO: episodes / group size tasks)."""
    grpo_group_size: int = 4
    """GRPO rollouts per task (paper: 8); SAPO and PPO play one rollout per task."""
    horizon: int = 0
    """Maximum turns per episode, training and evaluation (0 = the env's registered horizon, the paper's:
    ALFWorld 50, WebShop 15; another value changes the spec hash, so a board will not host those bundles)."""
    # ------------------------------------------------------------------ prompts and generation
    prompt: str = "plain"
    """Prompt template: 'plain' (short, for tiny CPU models) or 'default' (the env's paper template)."""
    history_length: int = 0
    """Past (observation, action) pairs shown in the prompt (paper: 2)."""
    max_prompt_tokens: int = 1024
    """Prompt budget in tokens (longer prompts are truncated by the policy's documented rule and counted)."""
    max_response_tokens: int = 24
    """Generated tokens per turn (paper: 512)."""
    temperature: float = 1.0
    """Training rollout temperature (paper: 1.0)."""
    eval_temperature: float = 0.4
    """Evaluation temperature (paper: 0.4)."""
    old_log_probs: str = "rollout"
    """Source of log π_old (and SAPO's V_old, Q_old): 'recompute' (a forward pass after the rollout) or 'rollout'
    (kept from the HF sampler, which ran the same weights: the old-log-prob phase costs nothing)."""
    constrain: str = "admissible"
    """Decoding constraint for training and evaluation: 'none' or 'admissible' (actions restricted to the turn's
    admissible actions, the same mask in sampling and in every log-prob; see agents/constraint.py)."""
    # ------------------------------------------------------------------ optimisation
    lr: float = 3e-4
    """Actor learning rate (paper, for 1.5B/7B models: 1e-6; the 0.2 M-parameter tiny model needs a larger one)."""
    critic_lr: float = 1e-3
    """PPO critic learning rate."""
    kl_coef: float = 0.01
    """β, low-variance KL to the warm-started reference (paper: 0.01)."""
    micro_batch_size: int = 16
    """Turns per forward/backward (bounds memory; does not change the result)."""
    minibatches: int = 1
    """Optimizer steps per epoch over the iteration's batch."""
    ppo_epochs: int = 1
    """Passes over each iteration's batch (paper / verl-agent: 1)."""
    # ------------------------------------------------------------------ warm start (trained once, shared)
    sft_episodes: int = 48
    """Expert episodes cloned by the shared behaviour-cloning warm start (0 = start RL from the base model)."""
    sft_agent: str = "expert"
    """Teacher of the warm start: 'expert' (the env's oracle) or 'random' (random-admissible: teaches the output format only)."""
    sft_epochs: int = 10
    """Passes of the warm start over the expert turns."""
    sft_lr: float = 3e-3
    """Learning rate of the warm start."""
    # ------------------------------------------------------------------ evaluation (identical for all)
    eval_split: str = ""
    """Split evaluated after training and for the warm start ('' = the env's first leaderboard split, e.g. Vault
    'test', ALFWorld 'eval_out_of_distribution'; else the env's default)."""
    eval_seeds: str = "0,1,2"
    """Comma-separated evaluation seeds (one pass over the split each)."""
    eval_tasks: int = 0
    """Evaluate only the first N tasks of the split (0 = all; a board admits only bundles of the whole split)."""
    eval_batch_size: int = 60
    """Envs stepped together during evaluation."""
    eval_every: int = 5
    """Also evaluate each run every N iterations, on the first evaluation seed, for the held-out learning curve
    (0 = only after training; the training RNG is restored after each, so a run's numbers do not change)."""

    def __post_init__(self) -> None:
        unknown = [a for a in self.algo_list if a not in ALGOS]
        if unknown or not self.algo_list:
            raise ValueError(f"unknown algos {unknown or self.algos!r}; valid choices: {list(ALGOS)}")
        if self.seeds < 1 or self.iterations < 1 or self.horizon < 0:
            raise ValueError("seeds and iterations must be >= 1, horizon >= 0")
        if "grpo" in self.algo_list and self.episodes_per_iteration % self.grpo_group_size:
            raise ValueError(
                f"episodes_per_iteration ({self.episodes_per_iteration}) must be a multiple of grpo_group_size "
                f"({self.grpo_group_size}): every method plays the same number of episodes per iteration"
            )
        if self.workers < 1:
            raise ValueError("workers must be >= 1")
        if not self.eval_seed_list:
            raise ValueError("eval_seeds must list at least one seed")

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

        entry = ENVS.get(self.env)
        return self.eval_split or (entry.eval_splits[0] if entry is not None and entry.eval_splits else None)

    def runs(self) -> list[tuple[str, int]]:
        """Every (algo, seed) pair, seed-major so an early stop still has every method at seed 0."""
        return [(algo, seed) for seed in self.seed_list for algo in self.algo_list]

    def train_config(self, algo: str, seed: int, model: str | None = None) -> TrainConfig:
        """The :class:`TrainConfig` of one run; runs differ only in ``algo`` and ``seed``."""
        return TrainConfig(
            algo=algo, env=self.env, env_arg=[*self.env_arg, *([f"max_episode_steps={self.horizon}"] if self.horizon else [])],
            model=model or self.model, tiny_hidden_size=self.tiny_hidden_size, tiny_layers=self.tiny_layers, seed=seed, iterations=self.iterations, device=self.device,
            out_dir=f"{self.out}/runs/{run_key(algo, seed)}", resume=True, checkpoint_every=1,
            progress=self.progress, episodes_per_iteration=self.episodes_per_iteration,
            group_size=self.grpo_group_size if algo == "grpo" else 1, history_length=self.history_length,
            prompt=self.prompt, max_prompt_tokens=self.max_prompt_tokens, max_response_tokens=self.max_response_tokens,
            temperature=self.temperature, eval_temperature=self.eval_temperature, constrain=self.constrain, old_log_probs=self.old_log_probs, lr=self.lr, critic_lr=self.critic_lr,
            kl_coef=self.kl_coef, micro_batch_size=self.micro_batch_size, minibatches=self.minibatches, ppo_epochs=self.ppo_epochs,
            sft_episodes=self.sft_episodes, sft_agent=self.sft_agent, sft_epochs=self.sft_epochs, sft_lr=self.sft_lr,
        )

    def fingerprint(self) -> str:
        """Hash of every field that changes results (a resumed compare must match it), the trainer's
        defaults this config does not set included (a code change of, e.g., c_V is another comparison)."""
        volatile = {"out", "max_runs", "progress", "device", "micro_batch_size", "eval_batch_size", "workers"}
        fields = {k: v for k, v in dataclasses.asdict(self).items() if k not in volatile}
        per_run = {"algo", "seed", "group_size", "out_dir", "progress", "device", "micro_batch_size"}
        train = {k: v for k, v in dataclasses.asdict(self.train_config("sapo", 0)).items() if k not in per_run}
        return hashlib.sha256(json.dumps({"compare": fields, "train": train}, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Preset:
    """A named set of overrides of :class:`CompareConfig` (``--preset NAME``)."""

    name: str
    description: str
    needs_gpu: bool
    overrides: tuple[tuple[str, Any], ...]

    def apply(self, cfg: CompareConfig) -> CompareConfig:
        return dataclasses.replace(cfg, **dict(self.overrides))


def _paper(model: str, micro_batch_size: int) -> tuple[tuple[str, Any], ...]:
    """The settings of ``recipes/paper.sh`` (the paper's, as the trainer's flags spell them)."""
    return (
        ("env", "sapo/ALFWorld-v0"), ("env_arg", []), ("model", model), ("lr", 1e-6), ("critic_lr", 1e-5), ("kl_coef", 0.01), ("iterations", 150),
        ("episodes_per_iteration", 128), ("grpo_group_size", 8), ("horizon", 0), ("prompt", "default"),
        ("history_length", 2), ("max_prompt_tokens", 2048), ("max_response_tokens", 512), ("sft_episodes", 0),
        ("ppo_epochs", 1), ("seeds", 3), ("device", "cuda"), ("micro_batch_size", micro_batch_size), ("eval_batch_size", 32),
        ("constrain", "none"), ("old_log_probs", "recompute"), ("sft_epochs", 5), ("workers", 1), ("eval_seeds", "0"),
    )


PRESETS: dict[str, Preset] = {
    "cpu": Preset("cpu", "the CPU default: embedded ALFWorld, tiny model, shared behaviour-cloning warm start, ≤ 15 min on 2 cores", False, ()),
    "vault": Preset(
        "vault", "the diagnostic sapo/Vault-v0 task (sparse reward, horizon 4), where RL visibly lifts a weak warm start in ~5 min",
        False, (("env", "sapo/Vault-v0"), ("env_arg", []), ("tiny_hidden_size", 64), ("seeds", 3), ("iterations", 60),
                ("episodes_per_iteration", 16), ("max_response_tokens", 24), ("lr", 3e-4), ("sft_episodes", 32),
                ("sft_epochs", 50), ("eval_seeds", "0,1,2,3"), ("constrain", "admissible"), ("old_log_probs", "recompute"),
                ("eval_batch_size", 16))),
    "paper-1.5b": Preset("paper-1.5b", "the paper's setting with Qwen2.5-1.5B-Instruct (lr 1e-6, KL 0.01, 150 iterations)",
                         True, _paper("Qwen/Qwen2.5-1.5B-Instruct", 16)),
    "paper-7b": Preset("paper-7b", "the paper's setting with Qwen2.5-7B-Instruct (lr 1e-6, KL 0.01, 150 iterations)",
                       True, _paper("Qwen/Qwen2.5-7B-Instruct", 4)),
    "smollm2-1gpu": Preset(
        "smollm2-1gpu", "SmolLM2-135M-Instruct (offline wheel) on one GPU: recipes/smollm2_one_gpu.sh's settings", True,
        _paper("smollm2", 8) + (("iterations", 100), ("episodes_per_iteration", 64), ("sft_episodes", 64),
                                ("sft_agent", "expert"))),
}
"""``--preset`` choices. The paper presets keep the env's registered horizon (ALFWorld 50, WebShop 15)."""
