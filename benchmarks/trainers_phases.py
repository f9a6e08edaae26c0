"""Per-phase time and peak training memory of every registered method (``--algo``), side by side, plus TRL's anchor.

One run, one model, one batch of env turns: the rollout (generation + reward) is timed ``--repeats``
times from the same seed, alternating PPO's and GRPO's sampler with SAPO's (the same turns; with
``--old-log-probs rollout``, the default, SAPO's also keeps the w⁺/w⁻ logits; the methods without a readout learn from PPO's batch); then each method's six
learning phases (old log-prob, reference, value, advantage, critic update, actor update) run on its
batch through the shared :meth:`trainers.loop.Trainer.learn`, ``--repeats`` rounds round-robin with a
different method first each round. The table shows medians and the ratios the suite targets:

* SAPO/PPO iteration time ≤ 0.60 (paper: 0.668), SAPO/GRPO update time ≤ 1.03,
* SAPO/PPO peak training memory ≤ 0.55,
* our GRPO step / TRL ``GRPOTrainer`` step at equal work (8 completions × 32 tokens, one prompt) ≤ 1.0.

GiGPO and RLOO differ from GRPO in the advantage phase only (their rows show what their group terms cost).

Two sizes (``--size``, one table each; every setting applies to every method alike):

* ``tiny``: hidden 64, 2 layers (0.2 M parameters), micro-batch 16: activations dominate memory and
  token-by-token sampling dominates time; the TRL anchor runs at this size.
* ``states``: hidden 512, 8 layers (18 M parameters), micro-batch 2, gradient checkpointing of the
  actor *and* the critic: model states dominate memory, as for the paper's 1.5B/7B models.

Both default to a bfloat16 KL reference (``--reference-dtype``; verl keeps it in bf16) and to old
log-probs kept from the sampler (``--old-log-probs``; ``recompute`` is verl's extra pass). Peak memory
is ``torch.cuda.max_memory_allocated`` on CUDA and, on CPU, the exact live-tensor peak of
:class:`trainers.profiling.LiveTensorMeter` in a separate, untimed pass; the cheaper per-iteration
estimate the trainer logs (states + saved activations, :class:`~trainers.profiling.MemoryMeter`) is
printed beside it.

    OMP_NUM_THREADS=1 python benchmarks/trainers_phases.py --size tiny states
    python benchmarks/trainers_phases.py --size states --device cuda
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import statistics
import time
from typing import Any

import torch

from trainers.compare.config import label
from trainers.config import ALGOS, GROUP_ALGOS, TrainConfig
from trainers.experience import Experience, TurnRecord
from trainers.loop import Trainer
from trainers.methods import method_class
from trainers.profiling import PHASES, LiveTensorMeter, MemoryMeter, PhaseTimer, state_bytes

SIZES: dict[str, dict[str, Any]] = {
    "tiny": dict(hidden=64, layers=2, micro_batch_size=16, gradient_checkpointing=False),
    "states": dict(hidden=512, layers=8, micro_batch_size=2, gradient_checkpointing=True),
}
"""Presets of ``--size``; an explicit flag overrides its entry."""


def _policy(args: argparse.Namespace) -> Any:
    from agents.policy import PolicyModel

    heads = max(1, args.hidden // 64) if args.hidden >= 128 else 2
    return PolicyModel.tiny(
        seed=0,
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=heads,
        intermediate_size=2 * args.hidden,
    )


def _config(args: argparse.Namespace, algo: str, **overrides: Any) -> TrainConfig:
    fields = dict(
        algo=algo,
        env=args.env,
        env_arg=list(args.env_arg),
        prompt=args.prompt,
        history_length=args.history,
        device=args.device,
        episodes_per_iteration=args.episodes,
        group_size=8,
        max_response_tokens=args.max_response_tokens,
        micro_batch_size=args.micro_batch_size,
        kl_coef=args.kl_coef,
        reference_dtype=args.reference_dtype,
        old_log_probs=args.old_log_probs,
        gradient_checkpointing=args.gradient_checkpointing,
        bf16=args.bf16,
        progress=False,
        out_dir="/tmp/sapo-bench",
    )
    return TrainConfig(**{**fields, **overrides})


def _trainer(args: argparse.Namespace, algo: str, policy: Any, **overrides: Any) -> Trainer:
    """A Trainer (under gradient checkpointing PPO checkpoints its critic too, as the config asks)."""
    return Trainer(_config(args, algo, **overrides), policy=policy)


def _state(trainer: Trainer) -> tuple[Any, ...]:
    """The models and optimizers the method holds (what the memory meters count from the start)."""
    critic = trainer.critic
    return (
        trainer.policy.model,
        trainer.optimizer,
        trainer.reference,
        critic and critic.module,
        critic and critic.optimizer,
    )


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _rollouts(args: argparse.Namespace, base: Any) -> tuple[dict[str, Experience], dict[str, list[PhaseTimer]]]:
    """Each method's batch and ``--repeats`` timings of its rollout (generation + reward), from the same seed.

    The sampler is the same for every method; with ``--old-log-probs rollout`` a readout method's (SAPO's) also keeps
    the w⁺/w⁻ logits (one more decode step per row), so its rollout is timed apart from the others'."""
    collector = _trainer(args, "grpo", copy.deepcopy(base))
    plain = collector.agent.params
    variants = {"plain": plain}
    if args.old_log_probs == "rollout":
        variants["readout"] = dataclasses.replace(plain, value_logits=True)
    batches: dict[str, Experience] = {}
    timers: dict[str, list[PhaseTimer]] = {name: [] for name in variants}
    for _ in range(args.repeats):
        for name, params in variants.items():
            collector.agent.params, timer = params, PhaseTimer(torch.device(args.device))
            torch.manual_seed(0)
            _, batches[name] = collector.collect_batch(timer)
            timers[name].append(timer)
    sapo = "readout" if "readout" in variants else "plain"
    a, b = batches["plain"], batches[sapo]
    same = a.input_ids.shape == b.input_ids.shape and torch.equal(a.input_ids, b.input_ids)
    print(
        f"rollout: {len(a)} turns, {a.num_action_tokens} action tokens, {int(a.attention_mask.sum())} tokens in all; "
        f"SAPO's sampler drew {'the same' if same else 'DIFFERENT'} turns"
    )
    readout = {algo for algo in ALGOS if method_class(algo).readout}
    batches_of = {algo: (b if algo in readout else a) for algo in ALGOS}
    return batches_of, {algo: timers[sapo] if algo in readout else timers["plain"] for algo in ALGOS}


def phase_table(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Median per-phase seconds and peak bytes of each method on one shared rollout."""
    base = _policy(args).to(args.device)
    batches, rollout_timers = _rollouts(args, base)
    trainers = {algo: _trainer(args, algo, copy.deepcopy(base)) for algo in ALGOS}
    runs: dict[str, list[dict[str, float]]] = {algo: [] for algo in ALGOS}
    for repeat in range(args.repeats):  # round-robin, so machine load hits the methods alike,
        k = repeat % len(ALGOS)
        for algo in ALGOS[k:] + ALGOS[:k]:  # and each goes first in turn
            trainer = trainers[algo]
            trainer.start_reinforcement()
            timer, memory = PhaseTimer(torch.device(args.device)), MemoryMeter(torch.device(args.device))
            for phase in ("generation", "reward"):
                timer.add(phase, rollout_timers[algo][repeat].seconds[phase])
            trainer.learn(copy.deepcopy(batches[algo]), timer, memory)  # (the timer synchronizes CUDA)
            runs[algo].append({**timer.as_metrics(), "estimate_bytes": memory.peak_bytes(*_state(trainer))})
    table = {algo: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for algo, rs in runs.items()}
    rounds = [s["time/iteration"] / p["time/iteration"] for s, p in zip(runs["sapo"], runs["ppo"])]
    print("SAPO/PPO iteration time per round: " + " ".join(f"{r:.3f}" for r in rounds))
    for algo, trainer in trainers.items():
        table[algo]["state_bytes"] = state_bytes(*_state(trainer))
        table[algo]["peak_bytes"] = (
            _live_peak(trainer, batches[algo]) if args.device == "cpu" else table[algo]["estimate_bytes"]
        )
    table["sapo+lora"] = _lora_entry(args, base, batches["sapo"])
    return table


def _lora_entry(args: argparse.Namespace, base: Any, batch: Experience) -> dict[str, float]:
    """SAPO with LoRA adapters (``--lora-rank``, alpha 2r) on SAPO's batch: peak and state bytes of its learning
    phases (two untimed passes: the first allocates the optimizer state; the reference is the adapter-free base)."""
    trainer = _trainer(args, "sapo", copy.deepcopy(base), lora_rank=args.lora_rank, lora_alpha=2.0 * args.lora_rank)
    for _ in range(2):
        memory = MemoryMeter(torch.device(args.device))
        trainer.learn(copy.deepcopy(batch), PhaseTimer(torch.device(args.device)), memory)
    estimate = memory.peak_bytes(*_state(trainer))
    peak = _live_peak(trainer, batch) if args.device == "cpu" else estimate
    return {"peak_bytes": peak, "state_bytes": state_bytes(*_state(trainer)), "estimate_bytes": estimate}


def _live_peak(trainer: Trainer, batch: Experience) -> int:
    """Exact peak of live tensor bytes over one more (untimed) pass of the learning phases."""
    batch = copy.deepcopy(batch)
    with LiveTensorMeter(*_state(trainer)) as meter:
        trainer.learn(batch, PhaseTimer(), MemoryMeter(torch.device("cpu")))
    return meter.peak


def our_grpo_step(args: argparse.Namespace, prompt: str, rewards: list[float]) -> float:
    """Median seconds of one GRPO iteration at TRL's work: generate 8 × 32 tokens for one prompt, learn."""
    from agents.generation.base import GenerationParams

    trainer = _trainer(args, "grpo", _policy(args).to(args.device), kl_coef=0.0, micro_batch_size=8)
    ids = trainer.policy.encode_prompts([prompt]).token_ids * 8
    params = GenerationParams(max_new_tokens=32, temperature=1.0)
    times = []
    for _ in range(args.trl_steps):
        start = time.perf_counter()
        outs = trainer.agent.generator.generate(ids, params)
        turns = [TurnRecord(prompt, o, r, True, False, i, 0) for i, (o, r) in enumerate(zip(outs, rewards))]
        exp = Experience.collate(turns, trainer.policy.pad_token_id).to(args.device)
        trainer.learn(exp, PhaseTimer(), MemoryMeter(torch.device(args.device)))
        _sync(args.device)
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def trl_grpo_step(args: argparse.Namespace, prompt: str) -> float | None:
    """Median seconds of one ``trl.GRPOTrainer`` step on the same model and work (None without trl)."""
    try:
        from datasets import Dataset
        from transformers import TrainerCallback
        from trl import GRPOConfig, GRPOTrainer
    except ImportError:
        print("trl not installed (pip install 'sapo-gym[bench]'): no TRL anchor")
        return None
    policy = _policy(args)
    times: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, *a: Any, **k: Any) -> None:
            self.start = time.perf_counter()

        def on_step_end(self, *a: Any, **k: Any) -> None:
            times.append(time.perf_counter() - self.start)

    config = GRPOConfig(
        output_dir="/tmp/sapo-bench-trl",
        per_device_train_batch_size=8,
        num_generations=8,
        max_completion_length=32,
        max_steps=args.trl_steps,
        learning_rate=1e-6,
        beta=0.0,
        logging_strategy="no",
        save_strategy="no",
        report_to="none",
        use_cpu=args.device == "cpu",
        bf16=False,
        seed=0,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=policy.model,
        reward_funcs=lambda completions, **_: [float(len(c) % 3) for c in completions],
        args=config,
        train_dataset=Dataset.from_dict({"prompt": [prompt] * (8 * args.trl_steps)}),
        processing_class=policy.tokenizer,
        callbacks=[Clock()],
    )
    trainer.train()
    return statistics.median(times[1:])


def _print_table(results: dict[str, dict[str, float]]) -> None:
    head = f"{'phase (s)':<16}" + "".join(f"{a:>10}" for a in ALGOS)
    print(head + "\n" + "-" * len(head))
    for key in [*PHASES, "update", "iteration"]:
        print(f"{key:<16}" + "".join(f"{results[a][f'time/{key}']:>10.3f}" for a in ALGOS))
    for key, name in (
        ("peak_bytes", "peak MiB"),
        ("state_bytes", "  states MiB"),
        ("estimate_bytes", "  estimate MiB"),
    ):
        print(f"{name:<16}" + "".join(f"{results[a][key] / 2**20:>10.1f}" for a in ALGOS))


def _ratio(name: str, value: float, target: float) -> str:
    return f"{name:<34}{value:>8.3f}   target ≤ {target:<5} {'ok' if value <= target else 'MISSED'}"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--size", nargs="+", choices=list(SIZES), default=["tiny"], help="one table per size (see above)"
    )
    parser.add_argument("--env", default="sapo/Vault-v0")
    parser.add_argument("--episodes", type=int, default=16, help="episodes in the shared rollout (2 groups of 8)")
    parser.add_argument(
        "--env-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="env keyword argument (repeatable), e.g. data_dir=embedded or max_episode_steps=4",
    )
    parser.add_argument(
        "--prompt",
        choices=("plain", "default"),
        default="plain",
        help="'default' is the env's paper prompt (long on ALFWorld: the admissible list and history)",
    )
    parser.add_argument("--history", type=int, default=2)
    parser.add_argument("--max-response-tokens", type=int, default=32)
    parser.add_argument("--kl-coef", type=float, default=0.01)
    parser.add_argument(
        "--reference-dtype",
        default="auto",
        choices=["float32", "bfloat16", "auto"],
        help="KL reference dtype; auto: bfloat16 where the CPU/GPU computes it natively (trainers/hardware.py)",
    )
    parser.add_argument(
        "--old-log-probs",
        default="rollout",
        choices=["recompute", "rollout"],
        help="TrainConfig.old_log_probs for every method: keep the sampler's log-probs (and SAPO's V/Q "
        "logits) or recompute them in a forward pass",
    )
    parser.add_argument("--hidden", type=int, help="overrides the size's hidden width")
    parser.add_argument("--layers", type=int, help="overrides the size's layer count")
    parser.add_argument("--micro-batch-size", type=int, help="overrides the size's micro-batch")
    parser.add_argument(
        "--gradient-checkpointing",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="overrides the size's setting (actor and PPO critic alike)",
    )
    parser.add_argument(
        "--bf16",
        action="store_true",
        help="bf16 autocast for every method's forward passes, sampling and critic included (the paper's precision)",
    )
    parser.add_argument("--lora-rank", type=int, default=16, help="rank of the SAPO + LoRA memory row")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--trl-steps", type=int, default=8)
    parser.add_argument("--no-trl", action="store_true", help="skip the TRL anchor (it runs at the tiny size only)")
    return parser


def run_size(args: argparse.Namespace, size: str) -> None:
    """One table: the size's preset, overridden by explicit flags."""
    args = argparse.Namespace(**{**vars(args), **{k: v for k, v in SIZES[size].items() if getattr(args, k) is None}})
    torch.manual_seed(0)
    from trainers.hardware import describe, resolve_dtype

    print(f"\n{describe()}; reference dtype resolves to {resolve_dtype(args.reference_dtype, args.device)}")
    print(
        f"== size {size}: tiny Qwen2 hidden {args.hidden}, {args.layers} layers; micro-batch {args.micro_batch_size}; "
        f"gradient checkpointing {args.gradient_checkpointing}; reference {args.reference_dtype}; "
        f"old log-probs {args.old_log_probs}; env {args.env} {args.env_arg}; "
        f"prompt {args.prompt}, history {args.history}; "
        f"device {args.device}; torch threads {torch.get_num_threads()}"
    )
    results = phase_table(args)
    _print_table(results)
    s, p, g = results["sapo"], results["ppo"], results["grpo"]
    print(_ratio("SAPO/PPO iteration time", s["time/iteration"] / p["time/iteration"], 0.60))
    print(
        _ratio(
            "SAPO/PPO learning time (no rollout)",
            (s["time/iteration"] - s["time/generation"] - s["time/reward"])
            / (p["time/iteration"] - p["time/generation"] - p["time/reward"]),
            0.60,
        )
    )
    print(_ratio("SAPO/GRPO update time", s["time/update"] / g["time/update"], 1.03))
    print(_ratio("SAPO/PPO peak training memory", s["peak_bytes"] / p["peak_bytes"], 0.55))
    print(f"{'SAPO/PPO model states only':<34}{s['state_bytes'] / p['state_bytes']:>8.3f}")
    lora = results["sapo+lora"]
    print(
        f"{f'SAPO + LoRA r={args.lora_rank} peak, states MiB':<34}{lora['peak_bytes'] / 2**20:>8.1f}"
        f"{lora['state_bytes'] / 2**20:>8.1f}   (full SAPO {s['peak_bytes'] / 2**20:.1f}, {s['state_bytes'] / 2**20:.1f})"
    )
    for algo in (a for a in GROUP_ALGOS if a != "grpo"):  # the other group methods against GRPO
        other = results[algo]
        print(
            f"{label(algo) + '/GRPO advantage, update time':<34}{other['time/advantage'] / g['time/advantage']:>8.3f}"
            f"{other['time/update'] / g['time/update']:>8.3f}"
        )
    if size == "tiny" and not args.no_trl:
        from sapo_gym.prompts import PLAIN_PROMPT

        prompt = PLAIN_PROMPT.first.format(
            task_description="open the vault by pressing its 2 buttons in order",
            current_observation="You stand before a vault with 3 buttons. The panel glows red.",
            admissible_actions="look, press red, press blue, press green",
        )
        trl = trl_grpo_step(args, prompt)
        ours = our_grpo_step(args, prompt, [float(i % 3) for i in range(8)])
        if trl is not None:
            print(f"GRPO step, 8 × 32 tokens: ours {ours:.3f} s, TRL GRPOTrainer {trl:.3f} s")
            print(_ratio("ours/TRL GRPO step", ours / trl, 1.0))


def main() -> None:
    args = _parser().parse_args()
    for size in args.size:
        run_size(args, size)


if __name__ == "__main__":
    main()
