"""How close the rollout sampler runs to the model's own forward rate, on one real training iteration.

One iteration of ``sapo-gym compare``'s CPU default (ALFWorld-Mini, the tiny 0.56 M model, admissible-action
constraint, 8 envs) is played once; every ``generate`` call's prompts and sampled responses are recorded. Then,
on exactly those batches (same batch sizes, same prompt and response lengths), ``--repeats`` rounds of:

* **sampler**: ``HFGenerator.generate`` on the recorded prompts (prefill + one forward per new token, the KV cache
  reused; constraints rebuilt from the recorded admissible actions);
* **prefill only**: one forward over the left-padded prompts (logits at the last position), what the sampler's first
  step costs;
* **forward only**: one forward over the left-padded prompt + response of each batch with logits everywhere (what
  the trainer's old-log-prob pass computes): the model's forward rate on the same tokens.

Rates count prompt + generated tokens (padding excluded). FLOPs are estimated from the weights: 2 per weight of the
layers per token, 4·d per attended position per layer (QKᵀ and AV), 2·V·d per position whose logits are computed.
The sampler's share of the forward-only rate is the headline; the rest of the gap is per-step overhead.

    OMP_NUM_THREADS=1 python benchmarks/generation_rate.py --model runs/compare/warm_start/policy
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import statistics
import time
from typing import Any

import torch

from agents.generation.hf import _left_pad
from trainers.compare.config import CompareConfig
from trainers.hardware import describe
from trainers.loop import Trainer
from trainers.profiling import PhaseTimer


@dataclasses.dataclass
class Call:
    """One recorded ``generate`` call: its prompts, responses and admissible-action lists."""

    prompts: list[list[int]]
    responses: list[list[int]]
    admissible: list[list[str] | None]


def record_iteration(model: str, draft_tokens: int) -> tuple[Trainer, list[Call], float]:
    """Play one CPU-default training iteration from ``model``; every generate call, and the generation phase's time."""
    cfg = CompareConfig(progress=False)
    tcfg = dataclasses.replace(
        cfg.train_config("sapo", 0),
        model=model,
        sft_episodes=0,
        progress=False,
        out_dir="/tmp/sapo-bench-generation",
        draft_tokens=draft_tokens,
    )
    trainer = Trainer(tcfg)
    calls: list[Call] = []
    agent = trainer.agent
    act = agent.act_detailed

    def recording_act(observations: Any, infos: Any = None) -> Any:
        outputs = act(observations, infos)
        calls.append(
            Call(
                [o.prompt_ids for o in outputs],
                [o.token_ids for o in outputs],
                [(i or {}).get("admissible_actions") for i in (infos or [{}] * len(outputs))],
            )
        )
        return outputs

    agent.act_detailed = recording_act  # type: ignore[method-assign]
    rollout, _ = trainer.collect_batch(PhaseTimer(trainer.device))
    agent.act_detailed = act  # type: ignore[method-assign]
    return trainer, calls, rollout.generation_s


def _flops(model: torch.nn.Module, lengths: list[tuple[int, int]], logits_at: str) -> float:
    """Estimated FLOPs of processing ``(prompt, response)`` rows; ``logits_at``: 'all', 'last' or 'generated'."""
    cfg = model.config
    layer_weights = sum(p.numel() for n, p in model.named_parameters() if ".layers." in n and p.dim() == 2)
    d, vocab, layers = cfg.hidden_size, cfg.vocab_size, cfg.num_hidden_layers
    total = 0.0
    for prompt, response in lengths:
        n = prompt + response
        total += 2 * layer_weights * n + 4 * d * layers * n * (n + 1) / 2
        heads = {"all": n, "last": 1, "generated": response}[logits_at]
        total += 2 * vocab * d * heads
    return total


def _timed(fn: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


@torch.inference_mode()
def measure(
    trainer: Trainer, calls: list[Call], repeats: int, drafts: list[int]
) -> dict[str, tuple[float, float, float]]:
    """``{pass: (seconds, tokens, flops)}`` over every recorded call, the median of ``repeats`` rounds; the sampler once
    per draft length in ``drafts`` (its drafts from the responses of the calls before, as in a rollout)."""
    policy, generator = trainer.policy, trainer.agent.generator
    builder = trainer.agent._constraints
    model = policy.model.eval()

    def sampler(draft_tokens: int) -> None:
        params = dataclasses.replace(trainer.agent.params, draft_tokens=draft_tokens)
        generator.reset()
        for call in calls:
            constraints = None if builder is None else [builder.build(a) for a in call.admissible]
            generator.generate(call.prompts, params, constraints)

    def forward(with_response: bool) -> None:
        for call in calls:
            rows = [p + r if with_response else p for p, r in zip(call.prompts, call.responses)]
            ids, mask, pos = _left_pad(rows, policy.pad_token_id, policy.device)
            model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=0 if with_response else 1)

    lengths = [(len(p), len(r)) for c in calls for p, r in zip(c.prompts, c.responses)]
    tokens = float(sum(p + r for p, r in lengths))
    return {
        **{
            f"sampler, {k} draft tokens" if k else "sampler, no drafts": (
                _timed(functools.partial(sampler, k), repeats),
                tokens,
                _flops(model, lengths, "generated"),
            )
            for k in drafts
        },
        "prefill only": (
            _timed(lambda: forward(False), repeats),
            float(sum(p for p, _ in lengths)),
            _flops(model, [(p, 0) for p, _ in lengths], "last"),
        ),
        "forward only": (_timed(lambda: forward(True), repeats), tokens, _flops(model, lengths, "all")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny", help="policy: a saved warm start (as the runs sample) or 'tiny'")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--draft-tokens",
        type=int,
        nargs="+",
        default=[0, 8, 16],
        help="draft lengths to time the sampler at (the iteration is recorded at the first)",
    )
    args = parser.parse_args()
    trainer, calls, generation_s = record_iteration(args.model, args.draft_tokens[0])
    rows = measure(trainer, calls, args.repeats, args.draft_tokens)
    turns = sum(len(c.prompts) for c in calls)
    generated = sum(len(r) for c in calls for r in c.responses)
    print(describe())
    print(
        f"torch {torch.__version__}, kernels {torch.backends.cpu.get_cpu_capability()}, threads {torch.get_num_threads()}; "
        f"model {args.model}; one iteration: {len(calls)} generate calls, {turns} turns, {generated} generated tokens; "
        f"generation phase as the trainer timed it: {generation_s:.2f} s"
    )
    reference = rows["forward only"][1] / rows["forward only"][0]
    print(
        "| pass | tokens | seconds | tokens/s | GFLOP | GFLOP/s | rate / forward-only rate |\n|---|---|---|---|---|---|---|"
    )
    for name, (sec, tokens, flops) in rows.items():
        print(
            f"| {name} | {tokens:.0f} | {sec:.3f} | {tokens / sec:.0f} | {flops / 1e9:.2f} | {flops / 1e9 / sec:.1f} "
            f"| {tokens / sec / reference:.2f} |"
        )
    trainer.close()


if __name__ == "__main__":
    main()
