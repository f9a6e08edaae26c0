"""How many episodes does a value function need before it explains the returns of episodes it has not seen?

The RL loop's ``value/explained_var`` asks V, before each update, to explain the returns of the iteration's new
episodes: a V that has seen the run's earlier episodes, judged on tasks it has not. The CPU default plays 8 episodes
an iteration over 240 training games, so by its second half V has seen 80 to 160 episodes, most games at most once.
This measures how much of held-out return variance a value function fitted on N episodes explains, for growing N:

1. roll a policy out at the RL loop's settings (``trainers.readout_warmup.collect_returns``: the loop's sampler and
   temperature, the task schedule past the RL iterations), each turn's target its Monte-Carlo discounted return;
2. hold the last quarter of the episodes out; fit on the first N episodes, N = 40 ... all of the rest;
3. learners: ridge regression on the prompt's bag of tokens and hashed token bigrams (counts clipped at 3), and
   optionally (``--critic-epochs``) PPO's critic as the loop starts it (``CriticModel.from_policy``: the policy's
   backbone, a fresh linear head) trained on the same turns in 16-turn minibatches;
4. report held-out explained variance pooled and per group of 8 episodes (the loop's grouping, mean over groups
   with any variance). Each learner's setting (ridge's λ, the critic's epoch) is the one that scores best on the
   held-out episodes: an optimistic choice, so each row is an upper bound on what that learner reaches from N
   episodes.

Beside the curve, the ceiling of any function of the prompt text: over turns whose prompt recurs verbatim, the share
of their return variance that lies between prompts (law of total variance with the within-prompt variance unbiased).
``benchmarks/value_ceiling.py`` measures the ceiling for the env's whole state.

    python -m benchmarks.value_learning_curve --model runs/compare/warm_start/policy [--episodes 1536]
        [--cache FILE] [--critic-epochs 6]

One process, ``OMP_NUM_THREADS=1``; docs/results-log.md has the measured numbers.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from benchmarks.env_workers import cpu_line  # noqa: E402

VOCAB_BUCKETS, BIGRAM_BUCKETS, COUNT_CLIP = 2048, 8192, 3.0
"""Feature layout: one column per token id below ``VOCAB_BUCKETS`` (the project tokenizer has 2,048; larger ids
share columns modulo it), ``BIGRAM_BUCKETS`` hashed bigram columns; counts clipped so one long list does not
dominate."""
RIDGE_LAMBDAS = (1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6)
GROUP_EPISODES = 8
"""Episodes per group in the per-iteration score: the CPU default's episodes per iteration."""
SIZES = (40, 80, 160, 320, 640)
"""Fitted episode counts of the curve (and all fitted episodes, always)."""


def explained(pred: np.ndarray, target: np.ndarray) -> float:
    """``1 − Var(target − pred) / Var(target)`` (CleanRL's explained variance); nan when the target is constant."""
    var = float(np.var(target))
    return 1.0 - float(np.var(target - pred)) / var if var > 0 else float("nan")


def per_group(pred: np.ndarray, target: np.ndarray, episode: np.ndarray, size: int = GROUP_EPISODES) -> float:
    """Mean of :func:`explained` over groups of ``size`` consecutive episodes whose returns vary."""
    groups = episode // size
    scores = [explained(pred[groups == g], target[groups == g]) for g in np.unique(groups)]
    return float(np.nanmean(scores)) if any(np.isfinite(scores)) else float("nan")


def prompt_features(input_ids: np.ndarray, prompt_lengths: np.ndarray) -> np.ndarray:
    """``(B, L)`` token ids and ``(B,)`` prompt lengths → ``(B, VOCAB_BUCKETS + BIGRAM_BUCKETS)`` clipped counts of the
    prompt's tokens and hashed token bigrams."""
    x = np.zeros((len(input_ids), VOCAB_BUCKETS + BIGRAM_BUCKETS), np.float32)
    for i, n in enumerate(prompt_lengths):
        p = input_ids[i, : int(n)].astype(np.int64)
        np.add.at(x[i], p % VOCAB_BUCKETS, 1.0)
        np.add.at(x[i], VOCAB_BUCKETS + (p[:-1] * 7919 + p[1:]) % BIGRAM_BUCKETS, 1.0)
    return np.minimum(x, COUNT_CLIP)


def ridge_predictions(
    x_fit: np.ndarray, y_fit: np.ndarray, x_test: np.ndarray, lambdas: Sequence[float]
) -> Iterator[tuple[float, np.ndarray]]:
    """Ridge regression (centred features and target, intercept unpenalized) for each λ → ``(λ, test predictions)``.
    Solves the primal (d × d) or the dual (n × n) system, whichever is smaller."""
    used = x_fit.sum(0) > 0
    xf, xt = x_fit[:, used].astype(np.float64), x_test[:, used].astype(np.float64)
    mu, y0 = xf.mean(0), float(y_fit.mean())
    xf, xt, yc = xf - mu, xt - mu, y_fit - y0
    primal = xf.shape[1] <= xf.shape[0]
    gram = xf.T @ xf if primal else xf @ xf.T
    for lam in lambdas:
        system = gram + lam * np.eye(len(gram))
        w = np.linalg.solve(system, xf.T @ yc) if primal else xf.T @ np.linalg.solve(system, yc)
        yield lam, xt @ w + y0


def prompt_ceiling(input_ids: np.ndarray, prompt_lengths: np.ndarray, returns: np.ndarray) -> tuple[float, int, int]:
    """Over turns whose prompt recurs verbatim: ``1 − E[Var(G | prompt)] / Var(G)`` (within-prompt variance with
    Bessel's correction), the number of such prompts and of their turns."""
    by_prompt: dict[bytes, list[float]] = defaultdict(list)
    for i, n in enumerate(prompt_lengths):
        by_prompt[input_ids[i, : int(n)].tobytes()].append(float(returns[i]))
    groups = [np.asarray(g) for g in by_prompt.values() if len(g) >= 2]
    if not groups:
        return float("nan"), 0, 0
    pooled = np.concatenate(groups)
    within = sum(float(((g - g.mean()) ** 2).sum()) for g in groups) / sum(len(g) - 1 for g in groups)
    return 1.0 - within / float(pooled.var()), len(groups), len(pooled)


def collect(model: str, episodes: int, cache: Path | None) -> tuple[Any, torch.Tensor]:
    """The policy's episodes at the CPU default's RL settings (cached in ``cache`` when given) → (turns, returns)."""
    if cache is not None and cache.exists():
        return torch.load(cache, weights_only=False)
    from trainers.compare.config import CompareConfig
    from trainers.loop import Trainer
    from trainers.readout_warmup import collect_returns

    cfg = CompareConfig().train_config("sapo", 0, model=model)
    cfg = dataclasses.replace(cfg, out_dir=tempfile.mkdtemp(prefix="value-curve-"), resume=False, progress=False)
    data, returns = collect_returns(Trainer(cfg), episodes)
    if cache is not None:
        tmp = cache.with_suffix(".tmp")
        torch.save((data, returns), tmp)
        tmp.replace(cache)
    return data, returns


def critic_scores(
    model: str, fit: Any, fit_returns: torch.Tensor, test: Any, test_returns: torch.Tensor, epochs: int
) -> Iterator[tuple[int, float, float]]:
    """PPO's critic as the loop starts it, trained on ``fit``'s turns → per epoch ``(epoch, held-out pooled, held-out
    per group)`` explained variance. AdamW at 1e-4, 16-turn minibatches, gradient norm clipped at 1, the squared
    error in ``R_max`` units (as the loop's critic loss without the clip)."""
    from agents.critic import CriticModel
    from trainers.compare.config import CompareConfig
    from trainers.experience import micro_batches
    from trainers.loop import Trainer

    cfg = CompareConfig().train_config("ppo", 0, model=model)
    cfg = dataclasses.replace(cfg, out_dir=tempfile.mkdtemp(prefix="value-curve-"), resume=False, progress=False)
    torch.manual_seed(0)
    critic = CriticModel.from_policy(Trainer(cfg).policy, value_scale=cfg.r_max, seed=0)
    optimizer, generator = torch.optim.AdamW(critic.parameters(), lr=1e-4), torch.Generator().manual_seed(0)
    batches = dataclasses.replace(fit, value_targets=fit_returns)
    episode = test.traj_ids.numpy()
    for epoch in range(1, epochs + 1):
        critic.train()
        for mb in batches.minibatches(16, generator=generator):
            optimizer.zero_grad()
            v = critic.values(mb.input_ids, mb.attention_mask, mb.prompt_lengths)
            ((v - mb.value_targets) / cfg.r_max).pow(2).mean().backward()
            torch.nn.utils.clip_grad_norm_(critic.parameters(), 1.0)
            optimizer.step()
        critic.eval()
        with torch.no_grad():
            parts = [critic.values(m.input_ids, m.attention_mask, m.prompt_lengths) for m in micro_batches(test, 64)]
        v, g = torch.cat(parts).float().numpy(), test_returns.numpy()
        yield epoch, explained(v, g), per_group(v, g, episode)


def curve_rows(data: Any, returns: torch.Tensor, args: argparse.Namespace) -> Iterator[str]:
    """One markdown row per fitted size: ridge's best λ and scores, and the critic's best epoch when asked."""
    episode = data.traj_ids.numpy()
    held = episode >= (int(episode.max()) + 1) * 3 // 4
    x = prompt_features(data.input_ids.numpy(), data.prompt_lengths.numpy())
    g = returns.numpy().astype(np.float64)
    n_fit = int(episode[~held].max()) + 1
    for n in sorted({s for s in SIZES if s < n_fit} | {n_fit}):
        chosen = (~held) & (episode < n)
        scored = [
            (per_group(p, g[held], episode[held]), explained(p, g[held]), lam)
            for lam, p in ridge_predictions(x[chosen], g[chosen], x[held], RIDGE_LAMBDAS)
        ]
        group, pooled, lam = max(scored, key=lambda s: np.nan_to_num(s[0], nan=-np.inf))
        row = f"| {n} | {int(chosen.sum())} | {pooled:+.3f} | {group:+.3f} | {lam:g} |"
        if args.critic_epochs:
            fit = data.select(torch.from_numpy(chosen.nonzero()[0]))
            test = data.select(torch.from_numpy(held.nonzero()[0]))
            best = max(
                critic_scores(args.model, fit, returns[chosen], test, returns[held], args.critic_epochs),
                key=lambda s: np.nan_to_num(s[2], nan=-np.inf),
            )
            row += f" {best[1]:+.3f} | {best[2]:+.3f} | {best[0]} |"
        yield row


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="runs/compare/warm_start/policy", help="the policy that plays")
    parser.add_argument("--episodes", type=int, default=1536, help="episodes collected (the last quarter held out)")
    parser.add_argument("--cache", type=Path, help="save the collected turns here, or load them if it exists")
    parser.add_argument("--critic-epochs", type=int, default=0, help="also fit PPO's critic, up to this many epochs")
    args = parser.parse_args(argv)
    print(cpu_line())
    data, returns = collect(args.model, args.episodes, args.cache)
    ids, lengths, g = data.input_ids.numpy(), data.prompt_lengths.numpy(), returns.numpy()
    ceiling, prompts, turns = prompt_ceiling(ids, lengths, g)
    episodes = int(data.traj_ids.max()) + 1
    print(f"{episodes} episodes, {len(g)} turns, {int((g > 0).sum())} turns with a positive return")
    print(f"ceiling of a function of the prompt text: {ceiling:.3f} ({prompts} prompts recurring, {turns} turns)\n")
    head = "| fitted episodes | fitted turns | ridge: held-out EV | ridge: per 8 episodes | ridge λ |"
    rule = "|---|---|---|---|---|"
    if args.critic_epochs:
        head, rule = head + " critic: held-out EV | critic: per 8 episodes | critic epoch |", rule + "---|---|---|"
    print(head, rule, sep="\n", flush=True)
    for row in curve_rows(data, returns, args):
        print(row, flush=True)


if __name__ == "__main__":
    main()
