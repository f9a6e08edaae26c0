"""One epoch of ``--preset webshop-cpu``'s behaviour cloning, whole minibatches against length-grouped micro-batches.

The preset's warm start clones 150 oracle episodes of ``sapo/WebShop-Mini-v0`` (653 turns whose prompts run from
~70 tokens, a search page, to ~930, a results page) in shuffled 16-turn minibatches. A whole minibatch pads every
turn to its longest one. ``--group-by-length`` runs each minibatch as micro-batches of ``--micro-batch-size``
turns sorted by length (:func:`trainers.sft.clone_step`; the same gradient). This times one epoch (forward and
backward, no optimizer step, so every row sees the same weights) for each cut, side by side in one process,
and prints the tokens each forwards and the time as a ratio of the whole-minibatch epoch, measured first and last.

    python -m benchmarks.webshop_clone [--episodes 150] [--sizes 8,4,2]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from benchmarks.env_workers import cpu_line  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=150, help="oracle episodes to clone (the preset's 150)")
    parser.add_argument("--sizes", default="8,4,2", help="micro-batch sizes to time against the whole minibatch")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

    from agents.registry import load_agent
    from sapo_cli import build_parser
    from sapo_cli.compare import config_from_args
    from trainers.experience import micro_batches
    from trainers.loop import Trainer
    from trainers.sft import _batch, clone_step, collect_demonstrations

    compare = config_from_args(build_parser().parse_args(["compare", "--preset", "webshop-cpu"]))
    cfg = dataclasses.replace(compare.train_config("sapo", 0), out_dir="/tmp/sapo-gym-webshop-clone", resume=False)
    policy = Trainer(cfg).policy
    demos = collect_demonstrations(cfg, cfg.gym_make_kwargs(), load_agent("expert", seed=0), args.episodes)
    data = _batch(policy, demos)
    lengths = data.attention_mask.sum(1).float()
    print(cpu_line())
    print(
        f"{len(demos)} turns; prompt+output tokens: min {int(lengths.min())}, median {int(lengths.median())}, "
        f"max {int(lengths.max())}\n"
    )

    def minibatches() -> list:
        return list(data.minibatches(16, generator=torch.Generator().manual_seed(0)))  # the same 16-turn cut each time

    def epoch(size: int | None, grouped: bool) -> tuple[float, int]:
        batches = minibatches()
        tokens = sum(m.input_ids.numel() for mb in batches for m in micro_batches(mb, size or len(mb), grouped))
        start = time.perf_counter()  # the timed part is the clone's own: its forward and backward passes
        for mb in batches:
            clone_step(policy, mb, size or len(mb), by_length=grouped)
        seconds = time.perf_counter() - start
        policy.model.zero_grad(set_to_none=True)
        return seconds, tokens

    runs = [("whole 16-turn minibatches", None, False)]
    runs += [(f"micro-batches of {s}, by length", int(s), True) for s in args.sizes.split(",")]
    runs += [("whole 16-turn minibatches (again)", None, False)]
    results = [(name, *epoch(size, grouped)) for name, size, grouped in runs]
    base = (results[0][1] + results[-1][1]) / 2
    print("| cut | tokens forwarded | seconds per epoch | × whole |\n|---|---|---|---|")
    for name, seconds, tokens in results:
        print(f"| {name} | {tokens:,} | {seconds:.1f} | {seconds / base:.2f} |")


if __name__ == "__main__":
    main()
