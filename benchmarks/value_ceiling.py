"""How much of the return variance can any value function explain? The ceiling of ``value/explained_var``.

By the law of total variance, ``Var(G_t) = Var(E[G_t | s_t]) + E[Var(G_t | s_t)]``: no function of the state explains
more than the first part. This measures that part on a policy's own turns. It rolls the policy out as the RL loop does
(the CPU default's settings, the task schedule, the training temperature), picks turns at random, and from each
picked turn's exact env state (the task, the reset seed, the replies before it replayed) plays K continuations with
the same policy. Their mean estimates ``V^π(s)``; with ``m_j`` and ``v_j`` the mean and (Bessel) variance of state j's
K returns, ``Var_s(V^π) ≈ Var_j(m_j) − mean_j(v_j)/K`` (unbiased) and ``Var(G) ≈ Var_j(m_j) + mean_j(v_j)·(K−1)/K``;
the ceiling is their ratio, with a bootstrap interval over the states.

The state here is the env's whole state, history included: a prompt without history shows less, so this bounds any
V that reads the prompt. The RL loop's ``value/explained_var`` is per iteration; this ratio is over all picked turns.

    python -m benchmarks.value_ceiling --model runs/compare/warm_start/policy [--iterations 30] [--states 8] [-k 16]

docs/results-log.md has the measured numbers. One process, ``OMP_NUM_THREADS=1``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from benchmarks.env_workers import cpu_line  # noqa: E402


def discounted(rewards: Sequence[float], dones: Sequence[bool], gamma: float) -> list[float]:
    """Each turn's return-to-go ``G_t = r_t + γ·G_{t+1}`` (0 after a terminating turn)."""
    out, run = [0.0] * len(rewards), 0.0
    for t in range(len(rewards) - 1, -1, -1):
        run = rewards[t] + gamma * run * (not dones[t])
        out[t] = run
    return out


def ceiling(returns: np.ndarray) -> float:
    """``(S, K)`` continuation returns of S states → the fraction of the return variance their V^π explains."""
    k = returns.shape[1]
    means, within = returns.mean(1), returns.var(1, ddof=1).mean()
    between = means.var(ddof=1) - within / k
    total = means.var(ddof=1) + within * (k - 1) / k
    return float(between / total) if total > 0 else float("nan")


def bootstrap(returns: np.ndarray, draws: int = 2000, seed: int = 0) -> tuple[float, float]:
    """The 2.5 and 97.5 percentiles of :func:`ceiling` over states resampled with replacement."""
    rng = np.random.default_rng(seed)
    values = [ceiling(returns[rng.integers(0, len(returns), len(returns))]) for _ in range(draws)]
    return float(np.nanpercentile(values, 2.5)), float(np.nanpercentile(values, 97.5))


def continuations(
    trainer: Any, fan: Any, episode: int, task_id: str, seed: int, prefix: list[str], prompt: str
) -> list[float]:
    """Replay ``prefix`` on every member of ``fan`` from the task's reset, check the state is the picked turn's, and
    play on with the trainer's policy to the end: each member's return from that turn."""
    k = fan.num_envs
    res = [fan.envs[i].reset_episode(episode, seed=seed, options={"task_id": task_id}) for i in range(k)]
    obs, infos = [r[0] for r in res], [r[1] for r in res]
    for reply in prefix:
        for i in range(k):
            obs[i], _, _, _, infos[i] = fan.envs[i].step(reply)
    if any(o != prompt for o in obs):
        raise RuntimeError("replaying the replies did not reproduce the picked turn's observation")
    trainer.agent.reset(k)
    rewards: list[list[float]] = [[] for _ in range(k)]
    dones: list[list[bool]] = [[] for _ in range(k)]
    active = list(range(k))
    while active:
        with torch.no_grad():
            outputs = trainer.agent.act_detailed([obs[i] for i in active], [infos[i] for i in active])
        still = []
        for i, out in zip(active, outputs):
            obs[i], reward, terminated, truncated, infos[i] = fan.envs[i].step(out.text)
            rewards[i].append(float(reward))
            dones[i].append(bool(terminated))
            if not (terminated or truncated):
                still.append(i)
        active = still
    return [discounted(r, d, trainer.cfg.gamma)[0] for r, d in zip(rewards, dones)]


def measure(trainer: Any, fan: Any, iterations: int, states: int, seed: int) -> list[dict[str, Any]]:
    """Roll out ``iterations`` batches; from ``states`` random turns of each, the continuations' returns."""
    from trainers.profiling import PhaseTimer

    rng, rows = random.Random(seed), []
    for it in range(iterations):
        trainer.iteration = it
        rollout, _ = trainer.collect_batch(PhaseTimer(trainer.device))
        episodes = defaultdict(list)
        for turn in rollout.turns:
            episodes[turn.traj_id].append(turn)
        for pick in rng.sample(rollout.turns, min(states, len(rollout.turns))):
            before = sorted((t for t in episodes[pick.traj_id] if t.turn_idx < pick.turn_idx), key=lambda t: t.turn_idx)
            replies = [t.output if isinstance(t.output, str) else t.output.text for t in before]
            task = rollout.episodes[pick.traj_id].task_id
            reset_seed = trainer.cfg.seed + 1000 * it + pick.traj_id  # trainers.rollout.collect's reset seed
            rows.append(
                {
                    "iteration": it,
                    "turn": pick.turn_idx,
                    "returns": continuations(trainer, fan, it, task, reset_seed, replies, pick.prompt),
                }
            )
        done = np.array([r["returns"] for r in rows])
        print(f"iteration {it + 1}/{iterations}: {len(rows)} states, ceiling so far {ceiling(done):.3f}", flush=True)
    return rows


def main() -> None:
    from trainers.compare.config import CompareConfig
    from trainers.loop import Trainer
    from trainers.rollout import make_train_vec

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="the policy (a compare warm_start/policy or a saved policy)")
    parser.add_argument("--iterations", type=int, default=30, help="rollout batches (the default's 8 episodes each)")
    parser.add_argument("--states", type=int, default=8, help="turns picked per batch")
    parser.add_argument("-k", "--continuations", type=int, default=16, help="continuations per picked turn")
    parser.add_argument("--out", default="", help="write the continuations' returns here (JSON)")
    args = parser.parse_args()
    print(cpu_line(), f"torch {torch.__version__}", flush=True)
    with tempfile.TemporaryDirectory() as out:
        cfg = dataclasses.replace(
            CompareConfig().train_config("sapo", 0, model=args.model), out_dir=out, resume=False, progress=False
        )
        trainer = Trainer(cfg)
        fan = make_train_vec(cfg.env, 1, args.continuations, 0, **cfg.gym_make_kwargs())
        rows = measure(trainer, fan, args.iterations, args.states, cfg.seed)
        trainer.close()
    returns = np.array([r["returns"] for r in rows])
    low, high = bootstrap(returns)
    print(
        f"\n{len(rows)} states × {args.continuations} continuations: the best value function explains "
        f"{ceiling(returns):.3f} [{low:.3f}, {high:.3f}] of the return variance"
    )
    if args.out:
        from sapo_gym.files import write_atomic

        write_atomic(args.out, json.dumps(rows).encode())


if __name__ == "__main__":
    main()
