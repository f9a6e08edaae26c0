"""Per-phase time and peak training memory of SAPO, PPO and GRPO, side by side, plus TRL's anchor.

One run, one model, one batch of env turns: a single rollout (generation + reward, timed once) is
fed to each method's six learning phases (old log-prob, reference, value, advantage, critic update,
actor update) through the shared :meth:`trainers.loop.Trainer.learn`, ``--repeats`` times; the
table shows medians and the ratios issue 5 targets:

* SAPO/PPO iteration time ≤ 0.60 (paper: 0.668), SAPO/GRPO update time ≤ 1.03,
* SAPO/PPO peak training memory ≤ 0.55,
* our GRPO step / TRL ``GRPOTrainer`` step at equal work (8 completions × 32 tokens, one prompt) ≤ 1.0.

Peak memory is ``torch.cuda.max_memory_allocated`` on CUDA and, on CPU, the tensor accounting of
:class:`trainers.profiling.MemoryMeter` (parameters, gradients, optimizer states of every model held,
plus the peak of activations saved for backward).

    OMP_NUM_THREADS=1 python benchmarks/trainers_phases.py            # tiny Qwen2 on sapo/Vault-v0
    python benchmarks/trainers_phases.py --hidden 256 --layers 4 --device cuda
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from typing import Any

import torch

from trainers.config import TrainConfig
from trainers.experience import Experience, TurnSample
from trainers.loop import Trainer
from trainers.profiling import PHASES, MemoryMeter, PhaseTimer

ALGOS = ("sapo", "ppo", "grpo")


def _policy(args: argparse.Namespace) -> Any:
    from agents.policy import PolicyModel

    heads = max(1, args.hidden // 64) if args.hidden >= 128 else 2
    return PolicyModel.tiny(seed=0, hidden_size=args.hidden, num_hidden_layers=args.layers,
                            num_attention_heads=heads, intermediate_size=2 * args.hidden)


def _config(args: argparse.Namespace, algo: str, **overrides: Any) -> TrainConfig:
    fields = dict(algo=algo, env=args.env, prompt="plain", history_length=args.history, device=args.device,
                  episodes_per_iteration=args.episodes, group_size=8, max_response_tokens=args.max_response_tokens,
                  micro_batch_size=args.micro_batch_size, kl_coef=args.kl_coef, progress=False, out_dir="/tmp/sapo-bench")
    return TrainConfig(**{**fields, **overrides})


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def phase_table(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Median per-phase seconds and peak bytes of each method on one shared rollout."""
    base = _policy(args).to(args.device)
    collector = Trainer(_config(args, "grpo"), policy=copy.deepcopy(base))
    shared = PhaseTimer()
    _, batch = collector.collect_batch(shared)
    print(f"rollout: {len(batch)} turns, {batch.num_action_tokens} action tokens, "
          f"{int(batch.attention_mask.sum())} tokens in all (generation {shared.seconds['generation']:.2f} s)")
    trainers = {algo: Trainer(_config(args, algo), policy=copy.deepcopy(base)) for algo in ALGOS}
    runs: dict[str, list[dict[str, float]]] = {algo: [] for algo in ALGOS}
    for _ in range(args.repeats):  # round-robin, so machine load hits the three methods alike
        for algo, trainer in trainers.items():
            trainer.start_reinforcement()
            timer, memory = PhaseTimer(), MemoryMeter(torch.device(args.device))
            timer.add("generation", shared.seconds["generation"])
            timer.add("reward", shared.seconds["reward"])
            trainer.learn(copy.deepcopy(batch), timer, memory)
            _sync(args.device)
            runs[algo].append({**timer.as_metrics(), "peak_bytes": memory.peak_bytes(
                trainer.policy.model, trainer.optimizer, trainer.reference, trainer.method.critic,
                trainer.method.critic_optimizer)})
    return {algo: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for algo, rs in runs.items()}


def our_grpo_step(args: argparse.Namespace, prompt: str, rewards: list[float]) -> float:
    """Median seconds of one GRPO iteration at TRL's work: generate 8 × 32 tokens for one prompt, learn."""
    from agents.generation.base import GenerationParams

    trainer = Trainer(_config(args, "grpo", kl_coef=0.0, micro_batch_size=8), policy=_policy(args).to(args.device))
    ids = trainer.policy.encode_prompts([prompt]).token_ids * 8
    params = GenerationParams(max_new_tokens=32, temperature=1.0)
    times = []
    for _ in range(args.trl_steps):
        start = time.perf_counter()
        outs = trainer.agent.generator.generate(ids, params)
        samples = [TurnSample(p, o.token_ids, o.log_probs, r, True, False, i, 0) for i, (p, o, r) in enumerate(zip(ids, outs, rewards))]
        exp = Experience.collate(samples, trainer.policy.pad_token_id).to(args.device)
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

    config = GRPOConfig(output_dir="/tmp/sapo-bench-trl", per_device_train_batch_size=8, num_generations=8,
                        max_completion_length=32, max_steps=args.trl_steps, learning_rate=1e-6, beta=0.0,
                        logging_strategy="no", save_strategy="no", report_to="none", use_cpu=args.device == "cpu",
                        bf16=False, seed=0, dataloader_num_workers=0, disable_tqdm=True)
    trainer = GRPOTrainer(model=policy.model, reward_funcs=lambda completions, **_: [float(len(c) % 3) for c in completions],
                          args=config, train_dataset=Dataset.from_dict({"prompt": [prompt] * (8 * args.trl_steps)}),
                          processing_class=policy.tokenizer, callbacks=[Clock()])
    trainer.train()
    return statistics.median(times[1:])


def _print_table(results: dict[str, dict[str, float]]) -> None:
    head = f"{'phase (s)':<16}" + "".join(f"{a:>10}" for a in ALGOS)
    print(head + "\n" + "-" * len(head))
    for key in [*PHASES, "update", "iteration"]:
        print(f"{key:<16}" + "".join(f"{results[a][f'time/{key}']:>10.3f}" for a in ALGOS))
    print(f"{'peak MiB':<16}" + "".join(f"{results[a]['peak_bytes'] / 2**20:>10.1f}" for a in ALGOS))


def _ratio(name: str, value: float, target: float) -> str:
    return f"{name:<34}{value:>8.3f}   target ≤ {target:<5} {'ok' if value <= target else 'MISSED'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="sapo/Vault-v0")
    parser.add_argument("--episodes", type=int, default=16, help="episodes in the shared rollout (2 groups of 8)")
    parser.add_argument("--history", type=int, default=2)
    parser.add_argument("--max-response-tokens", type=int, default=32)
    parser.add_argument("--micro-batch-size", type=int, default=16)
    parser.add_argument("--kl-coef", type=float, default=0.01)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--trl-steps", type=int, default=8)
    parser.add_argument("--no-trl", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"model: tiny Qwen2 hidden {args.hidden}, {args.layers} layers; env {args.env}; device {args.device}; "
          f"torch threads {torch.get_num_threads()}")
    results = phase_table(args)
    _print_table(results)
    s, p, g = results["sapo"], results["ppo"], results["grpo"]
    print(_ratio("SAPO/PPO iteration time", s["time/iteration"] / p["time/iteration"], 0.60))
    print(_ratio("SAPO/PPO learning time (no rollout)", (s["time/iteration"] - s["time/generation"] - s["time/reward"])
                 / (p["time/iteration"] - p["time/generation"] - p["time/reward"]), 0.60))
    print(_ratio("SAPO/GRPO update time", s["time/update"] / g["time/update"], 1.03))
    print(_ratio("SAPO/PPO peak training memory", s["peak_bytes"] / p["peak_bytes"], 0.55))
    if not args.no_trl:
        from sapo_gym.prompts import PLAIN_PROMPT

        prompt = PLAIN_PROMPT.first.format(task_description="open the vault by pressing its 2 buttons in order",
                                           current_observation="You stand before a vault with 3 buttons. The panel glows red.",
                                           admissible_actions="look, press red, press blue, press green")
        trl = trl_grpo_step(args, prompt)
        ours = our_grpo_step(args, prompt, [float(i % 3) for i in range(8)])
        if trl is not None:
            print(f"GRPO step, 8 × 32 tokens: ours {ours:.3f} s, TRL GRPOTrainer {trl:.3f} s")
            print(_ratio("ours/TRL GRPO step", ours / trl, 1.0))


if __name__ == "__main__":
    main()
