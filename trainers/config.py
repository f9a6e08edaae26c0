"""Training configuration: one dataclass, a docstring per field, turned into ``--help``.

Defaults mirror the paper and verl-agent where they print them (lr 1e-6, KL 0.01, clip 0.2,
history 2, max response 512, temperature 1.0 train / 0.4 eval, c_inv 0.1, one rollout per task
for SAPO/PPO and 8 for the group methods (GRPO, GiGPO, RLOO), equal env interactions per iteration). γ, λ, τ_v, c_V, c_Q, ε_V and
ε_Q are *not* printed in the paper: their defaults here are our choices and say so.

:func:`add_arguments` / :func:`from_args` turn the dataclass into argparse flags and back
(``lr`` → ``--lr``, ``max_response_tokens`` → ``--max-response-tokens``); the field docstrings
are read from this file's source, so the help text and the code cannot drift apart. The methods (``--algo``'s
choices and help, :data:`ALGOS`, :data:`GROUP_ALGOS`) come from :data:`trainers.method_registry.METHODS`.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import textwrap
from dataclasses import dataclass, field
from functools import cache
from typing import Any, ClassVar

from agents.constraint import CONSTRAINTS as CONSTRAIN  # torch-free, like this module
from trainers.method_registry import METHODS, describe_methods  # torch-free too: entry points load lazily

__all__ = [
    "TrainConfig",
    "ALGOS",
    "GROUP_ALGOS",
    "GIGPO_MODES",
    "ENV_WORKERS",
    "CHOICES",
    "RESULT_NEUTRAL",
    "add_arguments",
    "from_args",
    "field_docs",
    "field_help",
]

ALGOS = tuple(METHODS)
"""Every registered method's ``--algo`` name (:data:`trainers.method_registry.METHODS`)."""
GROUP_ALGOS = tuple(name for name, entry in METHODS.items() if entry.group)
"""The methods that play G rollouts per task and baseline each against its group (registry entries with ``group``;
G = :data:`~trainers.method_registry.GROUP_SIZE` by default)."""
GIGPO_MODES = ("mean_norm", "mean_std_norm")
STRATEGIES = ("torch", "deepspeed")
GENERATORS = ("hf", "vllm")
OLD_LOG_PROBS = ("recompute", "rollout")
ENV_WORKERS = ("sync", "ray")
"""Where the rollout's env members live (``--env-workers``): in this process, or one Ray actor each."""
REFERENCE_DTYPES = ("float32", "bfloat16", "auto")
TRAIN_REWARDS = ("env", "score")
"""What the trainer learns from (``--train-reward``): the env's reward, or its task score scaled by ``r_max``."""
CHOICES: dict[str, tuple[str, ...]] = {
    "algo": ALGOS,
    "strategy": STRATEGIES,
    "generator": GENERATORS,
    "old_log_probs": OLD_LOG_PROBS,
    "constrain": CONSTRAIN,
    "gigpo_mode": GIGPO_MODES,
    "env_workers": ENV_WORKERS,
    "reference_dtype": REFERENCE_DTYPES,
    "train_reward": TRAIN_REWARDS,
}
"""The values of each choice field of :class:`TrainConfig`: what it accepts and what argparse offers."""
RESULT_NEUTRAL = (
    "resume",
    "out_dir",
    "progress",
    "tensorboard",
    "checkpoint_every",
    "device",
    "env_workers",
    "ray_address",
)
"""The :class:`TrainConfig` fields that say where and how visibly a run goes, not what it learns: a resumed run may
change them (:attr:`TrainConfig.RESUME_FREE`) and compare's fingerprint leaves them out
(:meth:`trainers.compare.config.CompareConfig.fingerprint`). ``micro_batch_size`` is not one of them: each
micro-batch's loss is its own token mean, weighted by rows (:func:`trainers.update.update`), so the cut moves the
numbers."""


@dataclass
class TrainConfig:
    """Everything one ``sapo-gym train`` run depends on (saved with every checkpoint)."""

    # ------------------------------------------------------------------ run
    algo: str = "sapo"
    """Method (trainers/method_registry.py): {methods}."""
    env: str = "sapo/ALFWorld-v0"
    """Registered env id to train on."""
    env_arg: list[str] = field(default_factory=list)
    """Extra env keyword argument as KEY=VALUE (repeatable; values parsed as Python literals when possible)."""
    model: str = "tiny"
    """Policy: 'tiny' (random-init tiny Qwen2 + the project's tokenizer), 'smollm2', or an HF model path."""
    tiny_hidden_size: int = 64
    """Hidden size of the 'tiny' model (a multiple of 64; heads = hidden / 64, at least 2): 64 ≈ 0.2 M parameters, 128 ≈ 0.56 M."""
    tiny_layers: int = 2
    """Transformer layers of the 'tiny' model."""
    seed: int = 0
    """Seed of torch, sampling and the task schedule."""
    iterations: int = 100
    """RL iterations (one rollout batch + one update each)."""
    device: str = "cpu"
    """Torch device for the policy, the reference and the critic."""
    out_dir: str = "runs/train"
    """Folder for metrics.jsonl, checkpoints and the final model."""
    resume: bool = False
    """Continue from the last checkpoint in out_dir (its config must match)."""
    checkpoint_every: int = 10
    """Save a checkpoint every N iterations (and always after the last one); 0 saves only the last."""
    tensorboard: bool = False
    """Also write TensorBoard scalars (needs the tensorboard package)."""
    progress: bool = True
    """Show a progress bar."""
    # ------------------------------------------------------------------ rollout
    episodes_per_iteration: int = 16
    """Episodes per iteration, equal for every method (the group methods play episodes_per_iteration / group_size tasks)."""
    group_size: int = 0
    """Rollouts per task; 0 = the method's default, as in the paper: 8 for the group methods ({group_methods}), 1 for the others."""
    history_length: int = 2
    """Past (observation, action) pairs shown in the prompt (paper: 2)."""
    prompt: str = "default"
    """Prompt template: 'default' (the env's paper template), 'plain' (short PLAIN_PROMPT) or a shipped template's
    name (sapo_gym.prompts.PROMPTS, e.g. 'alfworld/verl-agent@796ed31')."""
    max_prompt_tokens: int = 2048
    """Prompts longer than this keep their last tokens (left truncation) and are counted in metrics."""
    max_response_tokens: int = 512
    """Maximum generated tokens per turn (paper: 512)."""
    temperature: float = 1.0
    """Sampling temperature for training rollouts (paper: 1.0)."""
    eval_temperature: float = 0.4
    """Sampling temperature for evaluation (paper: 0.4)."""
    old_log_probs: str = "recompute"
    """Source of log π_old (and of SAPO's V_old, Q_old): 'recompute' (one forward pass over the batch after the
    rollout, as verl does) or 'rollout' (kept from the HF sampler, which ran the same weights at the same
    precision: the old-log-prob phase has nothing left to run; generator 'hf' only)."""
    draft_tokens: int = 0
    """Speculative sampling in the HF sampler, training and evaluation alike: each forward pass also feeds up to this
    many draft tokens looked up in the responses of the current batch of episodes and keeps the ones speculative
    sampling accepts (agents/generation/speculative.py). Every token is drawn from the same distribution as without
    drafts, with other random draws: another sample of the same process. 0 = one token per forward pass."""
    constrain: str = "none"
    """Decoding constraint: 'none' (free) or 'admissible' (inside <action>…</action> only tokens that continue one of
    the turn's admissible actions, then </action>; the same per-token mask in sampling, old, current and reference
    log-probs and entropy, so ratios stay exact; training and evaluation alike; generator 'hf' or 'vllm', whose
    logits processor applies the same constraint: agents/generation/vllm_constraint.py)."""
    # ------------------------------------------------------------------ optimisation
    lr: float = 1e-6
    """Actor learning rate (paper: 1e-6)."""
    critic_lr: float = 1e-5
    """PPO critic learning rate (verl-agent's default; the paper does not print it)."""
    weight_decay: float = 0.0
    """AdamW weight decay of the actor and the critic."""
    grad_clip: float = 1.0
    """Global gradient-norm clip of each optimizer step (0 disables)."""
    ppo_epochs: int = 1
    """Passes over each rollout batch."""
    minibatches: int = 1
    """Optimizer steps per epoch (the batch of turns is shuffled and split into this many minibatches)."""
    micro_batch_size: int = 8
    """Turns per forward/backward (gradient accumulation inside a minibatch; bounds memory)."""
    group_by_length: bool = False
    """Cut each minibatch (the update's and the warm start's) into micro-batches longest turns first, and order each
    iteration's batch the same way for its inference passes (old log-probs, reference, PPO's values): a short turn is
    then not padded to a long one's length, which is faster where prompt lengths vary (WebShop's results pages). The
    warm start's gradient stays the same; the update's moves, since each micro-batch's loss is its own token mean."""
    bf16: bool = False
    """bfloat16 autocast for every forward pass — sampling, old log-probs, reference, PPO's critic, updates —
    over float32 weights (trainers.strategy.TorchStrategy; DeepSpeed: its bf16 mode)."""
    gradient_checkpointing: bool = False
    """Recompute the policy's activations in the backward pass: less memory, more time."""
    reference_dtype: str = "float32"
    """dtype of the frozen KL reference: 'float32', 'bfloat16' (half its memory, as verl keeps it; its logits are upcast
    to float32 for the log-softmax) or 'auto' (bfloat16 where the device computes it natively, else float32: trainers/hardware.py)."""
    # ------------------------------------------------------------------ LoRA (docs/training.md, "LoRA")
    lora_rank: int = 0
    """LoRA rank r of the policy's adapters (peft; 0 = off, full fine-tuning). With LoRA only the adapters and SAPO's two
    w+/w- LM-head rows train, and the KL reference is the same model with its adapters disabled (no second copy)."""
    lora_alpha: float = 16.0
    """LoRA alpha: the adapters' update is scaled by alpha / r (verl's default 16)."""
    lora_targets: str = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"
    """Comma-separated module names that get adapters (default: the attention and MLP projections of Qwen2/Llama), or
    'all-linear' (peft: every linear layer but the LM head)."""
    # ------------------------------------------------------------------ scale-out (docs/scale_out.md)
    strategy: str = "torch"
    """Training backend: 'torch' (one process, AdamW) or 'deepspeed' (ZeRO over the processes torchrun/deepspeed launch)."""
    zero_stage: int = 2
    """DeepSpeed ZeRO stage (0-3) when strategy is 'deepspeed': 2 shards gradients and optimizer states, 3 also the weights."""
    generator: str = "hf"
    """Rollout sampler: 'hf' (transformers on the training weights) or 'vllm' (a colocated vLLM engine, weights pushed after each update)."""
    vllm_gpu_memory_utilization: float = 0.4
    """Share of the GPU memory the colocated vLLM engine may take (generator 'vllm'; the rest is the trainer's)."""
    env_workers: str = "sync"
    """Where the training envs run: 'sync' (in the trainer's process) or 'ray' (one Ray actor per env, placed by
    Ray on any node of the cluster, stepped in parallel; the same episodes; needs the ray extra; docs/scale_out.md)."""
    ray_address: str = ""
    """Ray cluster of env_workers 'ray': '' (the running Ray, else a new local one), 'auto' (the cluster started on
    this machine by `ray start`), the HOST:PORT `ray start --head` printed, or 'ray://host:10001' (its Ray Client
    server); token auth or none, as the cluster runs (sapo_gym.ray_connect)."""
    # ------------------------------------------------------------------ losses and targets
    clip_eps: float = 0.2
    """PPO ratio clip ε (paper: 0.2)."""
    kl_coef: float = 0.01
    """β of the low-variance KL to the frozen reference policy (paper: 0.01; 0 skips the reference)."""
    entropy_coef: float = 0.0
    """c_H, entropy bonus coefficient (verl-agent default 0)."""
    c_inv: float = 0.1
    """Invalid-action penalty (paper: 0.1): SAPO and PPO subtract it from the turn advantage before the batch
    normalization (eq. 7); GRPO, RLOO and GiGPO from the turn's score before their group terms (verl-agent)."""
    gamma: float = 0.99
    """Turn-level discount γ (not printed in the paper; our choice)."""
    lam: float = 0.95
    """GAE λ (not printed in the paper; our choice)."""
    tau_v: float = 1.0
    """SAPO readout temperature τ_v in clip((z_w+ − z_w−)/τ_v, −1, 1) (not printed in the paper; our choice)."""
    r_max: float = 10.0
    """R_max, the value scale: largest absolute return (the envs' success reward is 10)."""
    train_reward: str = "env"
    """What the training rollouts are rewarded with: 'env' (the env's own reward; the paper's and verl-agent's) or
    'score' (the turn that ends an episode earns r_max × the env's [0, 1] task score, info['score'], in place of
    the env's reward: WebShop's partial credit for type, attributes, options and price; ALFWorld's score is its
    win, so there it changes nothing). Training only: evaluation, success and score are always the env's."""
    value_coef: float = 0.1
    """c_V, weight of the value loss (SAPO readout or PPO critic; not printed in the paper; our choice: at 0.5 SAPO's
    value and Q gradients outweighed the policy's on the shared weights and destabilized it, docs/results-log.md)."""
    q_coef: float = 0.1
    """c_Q, weight of SAPO's SARSA Q loss (not printed in the paper; our choice, as c_V)."""
    critic_warmup: int = 0
    """Iterations at the start that train the value function alone (verl's ``trainer.critic_warmup``): PPO updates its
    critic and not the actor; SAPO's actor update keeps its c_V/c_Q terms and the KL, without the policy term; the
    methods without a value function skip their update. They count in ``iterations``."""
    value_clip: float = 0.2
    """ε_V, value clip around the old value, in R_max-normalized units (not printed in the paper; our choice)."""
    q_clip: float = 0.2
    """ε_Q, Q clip around the old Q, in R_max-normalized units (not printed in the paper; our choice)."""
    grpo_stats_across_steps: bool = True
    """GRPO, RLOO, GiGPO's episode term: group statistics over every turn row's score (verl-agent's default);
    off: one entry per trajectory, its first turn's score."""
    # ------------------------------------------------------------------ GiGPO (docs/training.md; arXiv 2505.10978)
    gigpo_step_weight: float = 1.0
    """GiGPO ω: A = A_episode + ω·A_step, the weight of the anchor-state step advantage (verl-agent's
    algorithm.gigpo.step_advantage_w default 1.0)."""
    gigpo_gamma: float = 0.95
    """GiGPO γ of the discounted return from each step that the anchor groups normalize (verl-agent's GiGPO scripts set
    algorithm.gamma=0.95); GiGPO's own, SAPO/PPO's gamma is separate."""
    gigpo_mode: str = "mean_norm"
    """GiGPO normalization of both group terms: 'mean_norm' (subtract the group mean; the paper's 'w/o std',
    verl-agent's default) or 'mean_std_norm' (then divide by the Bessel std + 1e-6; 'w/ std')."""
    # ------------------------------------------------------------------ warm start
    sft_episodes: int = 0
    """Behaviour-cloning warm start: expert episodes collected through the env (0 = no warm start)."""
    sft_agent: str = "expert"
    """Teacher of the warm start: 'expert' (the env's oracle) or 'random' (random-admissible: teaches the format only)."""
    sft_epochs: int = 3
    """Passes over the expert turns."""
    sft_lr: float = 1e-4
    """Learning rate of the warm start."""
    readout_warmup_episodes: int = 0
    """SAPO only: before RL (after any behaviour-cloning warm start), roll the policy out for this many training
    episodes and fit its V and Q readouts to their discounted returns (trainers/readout_warmup.py); 0 = off.
    Our choice, not the paper's: the RL loop's one step per iteration leaves the readout near a constant at CPU scale."""
    readout_warmup_epochs: int = 1
    """Passes over the readout warm start's turns (16-turn minibatches)."""
    readout_warmup_lr: float = 3e-5
    """Learning rate of the readout warm start (every weight moves, so it is kept low)."""
    readout_warmup_kl: float = 1.0
    """Weight of the readout warm start's KL of the action tokens from the log-probs they were sampled with (k3, token
    mean): the fit moves every weight, and without it the CPU default's clone went from 0 % to 78 % invalid turns."""

    def __post_init__(self) -> None:
        for name, valid in CHOICES.items():
            if getattr(self, name) not in valid:
                raise ValueError(f"unknown {name} {getattr(self, name)!r}; valid choices: {list(valid)}")
        self._take_method_settings()
        if self.draft_tokens and self.generator != "hf":
            raise ValueError("draft_tokens needs generator 'hf' (vLLM has speculative decoding of its own)")
        if self.old_log_probs == "rollout" and self.generator != "hf":
            raise ValueError(
                "old_log_probs='rollout' needs generator 'hf': vLLM samples with its own kernels and "
                "precision, so its log-probs are not the trainer's (recompute them)"
            )
        self._check_lora()
        if not 0 <= self.zero_stage <= 3:
            raise ValueError(f"zero_stage must be 0-3, got {self.zero_stage}")
        if self.prompt != "default":
            from sapo_gym.registration import named_prompt

            named_prompt(self.prompt)  # an unknown name fails here, listing the valid ones
        if self.episodes_per_iteration % self.rollouts_per_task:
            raise ValueError(
                f"episodes_per_iteration ({self.episodes_per_iteration}) must be a multiple of the group size "
                f"({self.rollouts_per_task}) so that every method plays the same number of episodes"
            )
        for name in (
            "iterations",
            "episodes_per_iteration",
            "ppo_epochs",
            "minibatches",
            "micro_batch_size",
            "max_response_tokens",
            "readout_warmup_epochs",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("critic_warmup", "sft_episodes", "readout_warmup_episodes", "readout_warmup_kl", "draft_tokens"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")

    def _take_method_settings(self) -> None:
        """Set the values ``algo``'s registry entry fixes (an ablation such as ``sapo-tau0.1``); a field given another
        value than its default and the entry's is refused, not overridden."""
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        for name, value in METHODS[self.algo].settings:
            given = getattr(self, name)
            if given not in (value, defaults[name]):
                raise ValueError(f"--algo {self.algo} sets {name} = {value!r}; {given!r} was given")
            setattr(self, name, value)

    def _check_lora(self) -> None:
        if self.lora_rank < 0:
            raise ValueError(f"lora_rank must be >= 0, got {self.lora_rank}")
        if self.lora_rank and self.strategy != "torch":
            raise ValueError(
                "LoRA (--lora-rank) runs on the torch strategy only (one device; not tested under DeepSpeed)"
            )
        if self.lora_rank and self.sft_episodes > 0:
            raise ValueError(
                "the warm start (--sft-episodes) trains every weight: run it without LoRA, then start the "
                "LoRA run from the saved model (--model DIR), whose weights become the frozen base"
            )

    @property
    def rollouts_per_task(self) -> int:
        """G: the explicit ``group_size``, else the method's default (8 for the group methods, 1 for SAPO/PPO)."""
        return self.group_size or METHODS[self.algo].default_group_size

    @property
    def num_tasks(self) -> int:
        """Tasks per iteration (the vector env's groups)."""
        return self.episodes_per_iteration // self.rollouts_per_task

    def gym_make_kwargs(self) -> dict[str, Any]:
        """Everything ``gym.make`` / ``make_vec`` get: the prompt (a name, resolved by the env's factory), the
        history length, then the parsed ``--env-arg`` entries (:meth:`parsed_env_args`)."""
        return {"prompt": self.prompt, "history_length": self.history_length, **self.parsed_env_args()}

    RESUME_FREE: ClassVar[tuple[str, ...]] = (*RESULT_NEUTRAL, "iterations", "generator", "vllm_gpu_memory_utilization")
    """Fields a resumed run may change: :data:`RESULT_NEUTRAL`, and how long it runs and which sampler generates
    (these change the numbers, so compare's fingerprint keeps them: vLLM's memory share sets its batching)."""

    def resume_conflicts(self, saved: dict[str, Any]) -> list[str]:
        """The fields (sorted) in which a checkpoint's config ``saved`` differs from this one, except
        :attr:`RESUME_FREE`; a run resumes only from a checkpoint with none."""
        mine = dataclasses.asdict(self)
        return sorted(k for k, v in saved.items() if k not in self.RESUME_FREE and v != mine.get(k))

    def parsed_env_args(self) -> dict[str, Any]:
        """``env_arg`` entries as keyword arguments for ``gym.make`` / ``make_vec`` (:func:`sapo_gym.registration.parse_env_args`)."""
        from sapo_gym.registration import parse_env_args

        return parse_env_args(self.env_arg)


@cache
def field_docs(cls: type = TrainConfig) -> dict[str, str]:
    """The docstring under each field of a dataclass, read from its source."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for stmt, nxt in zip(body, body[1:]):
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[stmt.target.id] = " ".join(nxt.value.value.split())
    return docs


HELP_VALUES: dict[str, Any] = {
    "methods": describe_methods,
    "method_names": lambda: ", ".join(ALGOS),
    "group_methods": lambda: ", ".join(METHODS[a].label for a in GROUP_ALGOS),
}
"""``{name}`` in a field's docstring: filled in the help text from the method registry (never hand-listed)."""


def field_help(cls: type, name: str) -> str:
    """A field's docstring with its ``{name}`` placeholders (:data:`HELP_VALUES`) filled in."""
    doc = field_docs(cls).get(name, "")
    for key, value in HELP_VALUES.items():
        doc = doc.replace("{" + key + "}", value())
    return doc


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_arguments(
    parser: argparse.ArgumentParser | Any, cls: type = TrainConfig, skip: tuple[str, ...] = (), shown: Any = None
) -> list[str]:
    """One flag per dataclass field but ``skip``, its docstring as help and its default shown (``shown``: an
    instance whose values are the defaults, e.g. compare's CPU-default TrainConfig); the field names added."""
    names = []
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        names.append(f.name)
        if shown is not None:
            default = getattr(shown, f.name)
        else:
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default  # type: ignore[misc]
        help_text = f"{field_help(cls, f.name)} (default: {default!r})".replace("%", "%%")
        if f.type in ("bool", bool):
            parser.add_argument(_flag(f.name), action=argparse.BooleanOptionalAction, default=default, help=help_text)
        elif f.type in ("list[str]",):
            parser.add_argument(_flag(f.name), action="append", default=None, metavar="KEY=VALUE", help=help_text)
        else:
            kind = {"int": int, "float": float, "str": str}[str(f.type)]
            choices = list(CHOICES[f.name]) if cls is TrainConfig and f.name in CHOICES else None
            parser.add_argument(_flag(f.name), type=kind, default=default, choices=choices, help=help_text)
    return names


def from_args(args: argparse.Namespace, cls: type = TrainConfig) -> Any:
    """Build the dataclass from parsed flags (the inverse of :func:`add_arguments`)."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)}
    values = {k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in values.items() if v is not None}
    return cls(**values)
