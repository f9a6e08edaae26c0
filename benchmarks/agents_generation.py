"""Rollout generation speed: ``HFGenerator`` vs one-prompt-at-a-time vs ``transformers.generate``.

One run, one model, the same prompts and response lengths for every contender. Each produces what
the trainer needs: sampled tokens with w⁺/w⁻ masked and per-token log-probs (``generate`` gets a
``LogitsProcessor`` with ``mask_value_tokens`` and ``output_scores=True``). Two scenarios:

* ``equal``  — every response runs to the token budget;
* ``spread`` — responses end after 1…budget tokens (an end token is forced when a row reaches its
  length, the same rule for every contender), as in real rollouts where some envs answer briefly.
  ``HFGenerator`` drops finished rows from the batch and the KV cache; ``generate`` keeps computing them.

    OMP_NUM_THREADS=1 python benchmarks/agents_generation.py
    python benchmarks/agents_generation.py --prompts 64 --max-new-tokens 128 --hidden 256 --layers 4
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from agents.generation.base import GenerationParams
from agents.generation.hf import HFGenerator
from agents.logits import mask_value_tokens
from agents.policy import PolicyModel

BASE_PROMPT = 100


class _MaskValueTokens(LogitsProcessor):
    def __init__(self, ids: tuple[int, int]):
        self.ids = ids

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        return mask_value_tokens(scores, self.ids)


def _force_lengths(policy: PolicyModel, stop_total: int | None) -> Callable[[], None]:
    """Force an end token once a row holds ``stop_total`` real tokens; returns the hook's remover."""
    eos = policy.tokenizer.eos_token_id

    def hook(module, args, kwargs, output):
        done = kwargs["attention_mask"].sum(-1) >= stop_total
        output.logits[done, -1, :] = -1e4
        output.logits[done, -1, eos] = 0.0
        return output

    if stop_total is None:
        return lambda: None
    return policy.model.register_forward_hook(hook, with_kwargs=True).remove


def _hf_generate(policy: PolicyModel, prompts: list[list[int]], budget: int) -> int:
    width = max(map(len, prompts))
    ids = torch.tensor([[policy.pad_token_id] * (width - len(p)) + p for p in prompts])
    mask = (torch.arange(width)[None, :] >= torch.tensor([width - len(p) for p in prompts])[:, None]).long()
    out = policy.model.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=budget,
        do_sample=True,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        logits_processor=LogitsProcessorList([_MaskValueTokens(policy.value_token_ids)]),
        output_scores=True,
        return_dict_in_generate=True,
        pad_token_id=policy.pad_token_id,
        eos_token_id=list(policy.eos_token_ids),
    )
    new = out.sequences[:, width:]
    log_p = torch.stack([torch.log_softmax(s.float(), -1) for s in out.scores], 1).gather(-1, new[..., None])
    alive = torch.ones_like(new, dtype=torch.bool)
    for eos in policy.eos_token_ids:
        alive &= (new == eos).long().cumsum(1).sub((new == eos).long()) == 0
    _ = log_p.squeeze(-1) * alive
    return int(alive.sum())


def _contenders(policy: PolicyModel, budget: int) -> dict[str, Callable[[list[list[int]]], int]]:
    gen, params = HFGenerator(policy), GenerationParams(max_new_tokens=budget, seed=0)
    return {
        "HFGenerator (batched)": lambda ps: sum(len(o.token_ids) for o in gen.generate(ps, params)),
        "HFGenerator (one by one)": lambda ps: sum(len(gen.generate([p], params)[0].token_ids) for p in ps),
        "transformers generate": lambda ps: _hf_generate(policy, ps, budget),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from trainers.hardware import describe

    print(describe())  # kernels, rounding and dtype speed differ between CPUs: every table says which ran it
    policy = PolicyModel.tiny(
        hidden_size=args.hidden,
        num_attention_heads=args.hidden // 32,
        num_hidden_layers=args.layers,
        intermediate_size=4 * args.hidden,
    )
    rng = torch.Generator().manual_seed(0)
    budget = args.max_new_tokens
    lengths = torch.randint(0, budget, (args.prompts,), generator=rng).tolist()
    prompts = [torch.randint(10, 2000, (BASE_PROMPT + k,), generator=rng).tolist() for k in lengths]
    print(
        f"tiny Qwen2 hidden={args.hidden} layers={args.layers}, {args.prompts} prompts of {BASE_PROMPT}-{BASE_PROMPT + budget} "
        f"tokens, budget {budget}, torch threads {torch.get_num_threads()}, median of {args.repeats}"
    )
    print(f"{'scenario':<8} {'contender':<26} {'seconds':>8} {'tokens':>7} {'tokens/s':>9} {'time ratio':>11}")
    for scenario, stop_total in (("equal", None), ("spread", BASE_PROMPT + budget)):
        remove = _force_lengths(policy, stop_total)
        rows = {}
        try:
            for name, run in _contenders(policy, budget).items():
                times, tokens = [], 0
                for _ in range(args.repeats):
                    start = time.perf_counter()
                    tokens = run(prompts)
                    times.append(time.perf_counter() - start)
                rows[name] = (statistics.median(times), tokens)
        finally:
            remove()
        reference = rows["transformers generate"][0]
        for name, (sec, tokens) in rows.items():
            print(f"{scenario:<8} {name:<26} {sec:>8.3f} {tokens:>7} {tokens / sec:>9.0f} {sec / reference:>10.2f}x")


if __name__ == "__main__":
    main()
