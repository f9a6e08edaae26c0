"""Does SAPO's value readout explain the returns of episodes it was not fitted on?

Rolls a policy (a ``sapo-gym compare`` warm start by default) out on the CPU default's training games, holds the
last quarter of the episodes out, fits the readout to the rest exactly as the readout warm start does
(``trainers.readout_warmup.fit_readout``: Monte-Carlo returns, 16-turn minibatches, every weight), and prints, every
``--every`` steps, how much of the returns' variance V explains on the fitted turns and on the held-out ones.
A baseline that knows only the turn index (the mean return of each 5-turn bin of the fitted turns) shows how much
of the held-out variance the clock alone explains.

    python -m benchmarks.readout_generalization --model runs/compare/warm_start/policy [--episodes 512] [--lr 3e-5]

docs/results-log.md has the measured table. One process, ``OMP_NUM_THREADS=1``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from benchmarks.env_workers import cpu_line  # noqa: E402


def turn_index_baseline(
    fit_turns: torch.Tensor, fit_returns: torch.Tensor, turns: torch.Tensor, width: int = 5
) -> torch.Tensor:
    """The mean fitted return of each ``width``-turn bin (the overall mean for a bin it never saw), at ``turns``."""
    bins = int(max(fit_turns.max(), turns.max())) // width + 1
    sums = torch.zeros(bins).index_add_(0, fit_turns // width, fit_returns)
    counts = torch.zeros(bins).index_add_(0, fit_turns // width, torch.ones_like(fit_returns))
    means = torch.where(counts > 0, sums / counts.clamp_min(1), fit_returns.mean())
    return means[turns // width]


def main() -> None:
    from trainers.compare.config import CompareConfig
    from trainers.core_algos.losses import explained_variance
    from trainers.loop import Trainer
    from trainers.readout_warmup import collect_returns, explained, fit_readout

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="the policy to roll out and fit (a compare warm_start/policy)")
    parser.add_argument("--episodes", type=int, default=512, help="episodes rolled out (a quarter held out)")
    parser.add_argument("--lr", type=float, default=3e-5, help="the fit's learning rate")
    parser.add_argument("--epochs", type=int, default=2, help="passes over the fitted turns")
    parser.add_argument("--every", type=int, default=100, help="measure every N steps")
    parser.add_argument(
        "--kl",
        type=float,
        default=None,
        help="weight of the fit's KL from the sampled log-probs (default: TrainConfig's readout_warmup_kl)",
    )
    args = parser.parse_args()
    print(cpu_line(), f"torch {torch.__version__}", flush=True)

    with tempfile.TemporaryDirectory() as out:
        cfg = dataclasses.replace(
            CompareConfig().train_config("sapo", 0, model=args.model),
            out_dir=out,
            resume=False,
            episodes_per_iteration=16,
            readout_warmup_lr=args.lr,
            readout_warmup_epochs=args.epochs,
        )
        if args.kl is not None:
            cfg = dataclasses.replace(cfg, readout_warmup_kl=args.kl)
        trainer = Trainer(cfg)
        print(
            f"lr {cfg.readout_warmup_lr}, epochs {cfg.readout_warmup_epochs}, KL weight {cfg.readout_warmup_kl}",
            flush=True,
        )
        t0 = time.perf_counter()
        data, returns = collect_returns(trainer, args.episodes)
        trainer.close()
    held = data.traj_ids >= int(data.traj_ids.max() + 1) * 3 // 4
    fit, test = data.select((~held).nonzero().flatten()), data.select(held.nonzero().flatten())
    fit_returns, test_returns = returns[~held], returns[held]
    print(
        f"{int(data.traj_ids.unique().numel())} episodes, {len(fit)} fitted turns, {len(test)} held-out turns, "
        f"collected in {time.perf_counter() - t0:.0f} s; held-out wins: {int((test.rewards > 0).sum())}"
    )
    clock = turn_index_baseline(fit.turn_idx, fit_returns, test.turn_idx)
    print(f"turn-index baseline, held-out explained variance: {float(explained_variance(clock, test_returns)):.3f}\n")
    print("| step | explained variance, fitted turns | held-out turns |\n|---|---|---|")

    def measure(step: int) -> None:
        if step % args.every == 0:
            print(
                f"| {step} | {explained(trainer.policy, fit, fit_returns, cfg):.3f} | "
                f"{explained(trainer.policy, test, test_returns, cfg):.3f} |",
                flush=True,
            )

    t0 = time.perf_counter()
    fit_readout(trainer.policy, fit, fit_returns, cfg, on_step=measure)
    print(
        f"\nfitted in {time.perf_counter() - t0:.0f} s (with the measurements); last: "
        f"{explained(trainer.policy, fit, fit_returns, cfg):.3f} fitted, {explained(trainer.policy, test, test_returns, cfg):.3f} held out"
    )


if __name__ == "__main__":
    main()
