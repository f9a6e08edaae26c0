"""How many episodes does a value function need before it explains the returns of episodes it has not seen?

The RL loop's ``value/explained_var`` asks V, before each update, to explain the returns of the iteration's new
episodes: a V that has seen the run's earlier episodes, judged on tasks it has not. The CPU default plays 8 episodes
an iteration over 240 training games, so by its second half V has seen 80 to 160 episodes, most games at most once.
This measures how much of held-out return variance a value function fitted on N episodes explains, for growing N:

1. roll a policy out at the RL loop's settings (``trainers.readout_warmup.collect_returns``: the loop's sampler and
   temperature, the task schedule past the RL iterations), each turn's target its Monte-Carlo discounted return;
2. hold the last quarter of the episodes out; fit on the first N episodes, N = 40 ... all of the rest;
3. learners: ridge regression on the prompt's bag of tokens and hashed token bigrams (counts clipped at 3), and
   with ``--learners`` PPO's critic as the loop starts it (``critic``: the policy's backbone, a fresh linear head,
   16-turn minibatches) and SAPO's readout as the readout warm start fits it (``readout``:
   ``trainers.readout_warmup.fit_readout``), each for ``--epochs`` passes over the same turns;
4. report held-out explained variance pooled and per group of 8 episodes (the loop's grouping, mean over groups
   with any variance). Each learner's setting (ridge's λ, the network's epoch) is the one that scores best on the
   held-out episodes: an optimistic choice, so each row is an upper bound on what that learner reaches from N
   episodes.

Beside the curve, the ceiling of any function of the prompt text: over turns whose prompt recurs verbatim, the share
of their return variance that lies between prompts (law of total variance with the within-prompt variance unbiased);
and what the clock alone explains (the mean return of each 5-turn bin).
``benchmarks/value_ceiling.py`` measures the ceiling for the env's whole state.

    python -m benchmarks.value_learning_curve --model runs/compare/warm_start/policy [--episodes 1536]
        [--cache FILE] [--learners critic,readout] [--epochs 4]

One process, ``OMP_NUM_THREADS=1``, about 3 GB of memory at 1,536 episodes (the features); docs/results-log.md has the
measured numbers.
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
from tqdm import tqdm  # noqa: E402

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


def turn_index_baseline(
    fit_turns: np.ndarray, fit_returns: np.ndarray, turns: np.ndarray, width: int = 5
) -> np.ndarray:
    """The mean fitted return of each ``width``-turn bin (the overall mean for a bin never fitted), at ``turns``: how
    much the clock alone explains."""
    bins = int(max(fit_turns.max(), turns.max())) // width + 1
    sums = np.bincount(fit_turns // width, weights=fit_returns, minlength=bins)
    counts = np.bincount(fit_turns // width, minlength=bins)
    means = np.where(counts > 0, sums / np.maximum(counts, 1), fit_returns.mean())
    return means[turns // width]


def train_config(algo: str, model: str, **changes: Any) -> Any:
    """The CPU default's TrainConfig for ``algo`` from the policy ``model``, in a fresh folder, quiet."""
    from trainers.compare.config import CompareConfig

    cfg = CompareConfig().train_config(algo, 0, model=model)
    out = tempfile.mkdtemp(prefix="value-curve-")
    return dataclasses.replace(cfg, out_dir=out, resume=False, progress=False, **changes)


def collect(model: str, episodes: int, cache: Path | None) -> tuple[Any, torch.Tensor]:
    """The policy's episodes at the CPU default's RL settings (cached in ``cache`` when given) → (turns, returns)."""
    if cache is not None and cache.exists():
        return load_turns(cache)
    from trainers.loop import Trainer
    from trainers.readout_warmup import collect_returns

    trainer = Trainer(train_config("sapo", model))
    with tqdm(total=episodes, desc="episodes", unit="ep") as bar:
        data, returns = collect_returns(trainer, episodes, on_batch=lambda n: bar.update(n - bar.n))
    trainer.close()
    if cache is not None:
        save_turns(cache, data, returns)
    return data, returns


def save_turns(path: Path, data: Any, returns: torch.Tensor) -> None:
    """Write the turns and their returns to ``path`` atomically, as plain tensors (no pickled objects)."""
    fields = {f.name: getattr(data, f.name) for f in dataclasses.fields(data)}
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"fields": fields, "returns": returns}, tmp)
    tmp.replace(path)


def load_turns(path: Path) -> tuple[Any, torch.Tensor]:
    """What :func:`save_turns` wrote, read with ``weights_only=True``: a file that holds anything but tensors is
    refused, not executed."""
    from trainers.experience import Experience

    saved = torch.load(path, weights_only=True)
    return Experience(**saved["fields"]), saved["returns"]


Scores = list[tuple[int, float, float]]
"""Per epoch: ``(epoch, held-out explained variance, its mean over groups of 8 episodes)``."""


def critic_scores(
    model: str, fit: Any, fit_returns: torch.Tensor, test: Any, test_returns: torch.Tensor, epochs: int
) -> Scores:
    """PPO's critic as the loop starts it (``CriticModel.from_policy``: the policy's backbone, a fresh head), trained
    on ``fit``'s turns: AdamW at 1e-4, 16-turn minibatches, gradient norm clipped at 1, the squared error in ``R_max``
    units (the loop's critic loss without the clip)."""
    from agents.critic import CriticModel
    from trainers.experience import micro_batches
    from trainers.loop import Trainer

    cfg = train_config("ppo", model)
    torch.manual_seed(0)
    trainer = Trainer(cfg)
    critic = CriticModel.from_policy(trainer.policy, value_scale=cfg.r_max, seed=0)
    trainer.close()
    optimizer, generator = torch.optim.AdamW(critic.parameters(), lr=1e-4), torch.Generator().manual_seed(0)
    batches, scores = dataclasses.replace(fit, value_targets=fit_returns), []
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
        scores.append((epoch, *score(torch.cat(parts), test_returns, test)))
    return scores


def readout_scores(
    model: str, fit: Any, fit_returns: torch.Tensor, test: Any, test_returns: torch.Tensor, epochs: int
) -> Scores:
    """SAPO's readout fitted as the readout warm start fits it (``trainers.readout_warmup.fit_readout``: every weight,
    the warm start's learning rate and KL weight, 16-turn minibatches), scored after each epoch."""
    from trainers.loop import Trainer
    from trainers.readout_warmup import BATCH_TURNS, fit_readout, readout_v

    cfg = train_config("sapo", model, readout_warmup_epochs=epochs)
    trainer, per_epoch, scores = Trainer(cfg), -(-len(fit) // BATCH_TURNS), []

    def after(step: int) -> None:
        if step % per_epoch == 0:
            scores.append((step // per_epoch, *score(readout_v(trainer.policy, test, cfg), test_returns, test)))

    fit_readout(trainer.policy, fit, fit_returns, cfg, on_step=after)
    trainer.close()
    return scores


LEARNERS = {"critic": critic_scores, "readout": readout_scores}


def score(v: torch.Tensor, returns: torch.Tensor, test: Any) -> tuple[float, float]:
    """Held-out explained variance of ``v``, pooled and per group of 8 episodes."""
    v_np, g = v.float().numpy(), returns.numpy()
    return explained(v_np, g), per_group(v_np, g, test.traj_ids.numpy())


def held_out(episode: np.ndarray) -> np.ndarray:
    """Which turns belong to the last quarter of the episodes (by episode id): the held-out ones."""
    return episode >= (int(episode.max()) + 1) * 3 // 4


def curve_rows(data: Any, returns: torch.Tensor, args: argparse.Namespace) -> Iterator[str]:
    """One markdown row per fitted size: ridge's best λ and scores, then each asked learner's best epoch."""
    episode = data.traj_ids.numpy()
    held = held_out(episode)
    x = prompt_features(data.input_ids.numpy(), data.prompt_lengths.numpy())
    g = returns.numpy().astype(np.float64)
    n_fit = int(episode[~held].max()) + 1
    test = data.select(torch.from_numpy(held.nonzero()[0]))
    for n in tqdm(sorted({s for s in SIZES if s < n_fit} | {n_fit}), desc="fitted sizes"):
        chosen = (~held) & (episode < n)
        scored = [
            (per_group(p, g[held], episode[held]), explained(p, g[held]), lam)
            for lam, p in ridge_predictions(x[chosen], g[chosen], x[held], RIDGE_LAMBDAS)
        ]
        group, pooled, lam = max(scored, key=lambda s: np.nan_to_num(s[0], nan=-np.inf))
        row = f"| {n} | {int(chosen.sum())} | {pooled:+.3f} | {group:+.3f} | {lam:g} |"
        fit = data.select(torch.from_numpy(chosen.nonzero()[0]))
        for name in args.learners:
            scores = LEARNERS[name](args.model, fit, returns[chosen], test, returns[held], args.epochs)
            epoch, pooled, group = max(scores, key=lambda s: np.nan_to_num(s[2], nan=-np.inf))
            row += f" {pooled:+.3f} | {group:+.3f} | {epoch} |"
        yield row


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="runs/compare/warm_start/policy", help="the policy that plays")
    parser.add_argument("--episodes", type=int, default=1536, help="episodes collected (the last quarter held out)")
    parser.add_argument("--cache", type=Path, help="save the collected turns here, or load them if it exists")
    parser.add_argument(
        "--learners",
        type=lambda s: [n for n in s.split(",") if n],
        default=[],
        help="also fit these beside ridge, comma-separated: critic (PPO's), readout (SAPO's)",
    )
    parser.add_argument("--epochs", type=int, default=4, help="passes over the fitted turns of each learner")
    args = parser.parse_args(argv)
    unknown = set(args.learners) - set(LEARNERS)
    if unknown:
        parser.error(f"unknown learners {sorted(unknown)}; valid: {sorted(LEARNERS)}")
    print(cpu_line())
    data, returns = collect(args.model, args.episodes, args.cache)
    print_context(data, returns)
    head = "| fitted episodes | fitted turns | ridge: held-out EV | ridge: per 8 episodes | ridge λ |"
    rule = "|---|---|---|---|---|"
    for name in args.learners:
        head += f" {name}: held-out EV | {name}: per 8 episodes | {name}: epoch |"
        rule += "---|---|---|"
    print(head, rule, sep="\n", flush=True)
    for row in curve_rows(data, returns, args):
        print(row, flush=True)


def print_context(data: Any, returns: torch.Tensor) -> None:
    """The collection's size, the prompt-text ceiling and the clock's share, before the curve."""
    ids, lengths, g = data.input_ids.numpy(), data.prompt_lengths.numpy(), returns.numpy()
    ceiling, prompts, turns = prompt_ceiling(ids, lengths, g)
    episode, turn = data.traj_ids.numpy(), data.turn_idx.numpy().astype(np.int64)
    held = held_out(episode)
    clock = turn_index_baseline(turn[~held], g[~held], turn[held])
    print(f"{int(episode.max()) + 1} episodes, {len(g)} turns, {int((g > 0).sum())} turns with a positive return")
    print(f"ceiling of a function of the prompt text: {ceiling:.3f} ({prompts} prompts recurring, {turns} turns)")
    print(f"the turn index alone (mean return of each 5-turn bin), held out: {explained(clock, g[held]):+.3f}\n")


if __name__ == "__main__":
    main()
