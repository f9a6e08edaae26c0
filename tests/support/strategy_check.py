"""One SAPO update of a tiny Qwen2 through a training strategy: a self-check for multi-process set-ups.

    python -m tests.support.strategy_check --backend torch --out /tmp/one
    torchrun --nproc_per_node 2 -m tests.support.strategy_check --backend deepspeed --zero-stage 2 --out /tmp/two

Every rank builds the same seeded model and the same synthetic batch of turns (4 trajectories × 2
turns, equal response lengths so that each rank's loss is an exact share of the global one), runs
SAPO's old-forward / readout / advantage phases on the whole batch, then trains on the micro-batches the trainer
deals it (:func:`trainers.distributed.deal`, weighted as :func:`trainers.update.update` weights them) through the
strategy and takes one optimizer step. Each
rank writes ``zero{stage}/rank{r}.pt`` with the losses before and after the step (averaged over ranks)
and the gathered weights, which the tests compare across ranks and against the one-process run.

``--trainer`` checks the whole :class:`~trainers.loop.Trainer` instead: one SAPO (or ``--algo``) iteration
on ``sapo/Vault-v0`` with ``strategy='deepspeed'`` (each rank plays its share of the task groups), then a
sharded save, a resume into a fresh Trainer and one more iteration of both. Each rank writes
``trainer{stage}/rank{r}.pt``: the gathered batch of turns, the first update's statistics and weights (also
after its first optimizer step, so that a test can compare each step on its own), and the second
iteration's row and weights for the run that continued and the one that resumed.

    torchrun --nproc_per_node 2 -m tests.support.strategy_check --trainer --zero-stage 2 --out /tmp/loop
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from tests.support.turns import turn
from trainers.distributed import deal
from trainers.experience import Experience, TurnRecord, micro_batches
from trainers.strategy import StrategyConfig, Trainable, TrainingStrategy, make_strategy

__all__ = [
    "synthetic_turns",
    "prepare_update",
    "dealt",
    "update_step",
    "sapo_update",
    "resume_gap",
    "TRAINER_CHECK",
    "step_capturing",
    "capture_first_step",
    "trainer_check",
]


def synthetic_turns(vocab: int, banned: tuple[int, ...], seed: int = 0, response_len: int = 6) -> list[TurnRecord]:
    """4 trajectories of 2 turns with varied prompt lengths, fixed response length, a sparse final reward."""
    g = torch.Generator().manual_seed(seed)
    allowed = torch.tensor([i for i in range(3, vocab) if i not in banned])
    turns = []
    for traj in range(4):
        for t in range(2):
            plen = 5 + int(torch.randint(0, 6, (1,), generator=g))
            ids = allowed[torch.randint(0, len(allowed), (plen + response_len,), generator=g)].tolist()
            turns.append(
                turn(
                    ids[:plen],
                    ids[plen:],
                    [0.0] * response_len,
                    reward=float(t == 1 and traj % 2 == 0),
                    done=t == 1,
                    invalid=traj == 3 and t == 0,
                    traj_id=traj,
                    turn_idx=t,
                    group_id=traj,
                )
            )
    return turns


@dataclass
class Update:
    """What one SAPO update needs: the prepared actor, the method, the whole batch (every rank holds it)."""

    actor: Trainable
    method: Any
    batch: Experience
    micro_batch_size: int
    grad_norms: list[float] = field(default_factory=list)
    """The global gradient norm (pre-clip) of every step taken so far."""


def prepare_update(strategy: TrainingStrategy, lr: float = 1e-4, micro_batch_size: int = 2) -> Update:
    """A seeded tiny Qwen2 under SAPO, the synthetic batch through the old-forward/value/advantage phases."""
    from agents.policy import PolicyModel
    from trainers.config import TrainConfig
    from trainers.methods import make_method

    policy = PolicyModel.tiny(seed=0)
    cfg = TrainConfig(algo="sapo", micro_batch_size=micro_batch_size, lr=lr, grad_clip=strategy.cfg.grad_clip)
    method = make_method(cfg, policy)
    vocab = policy.model.get_input_embeddings().weight.shape[0]
    exp = Experience.collate(synthetic_turns(vocab, policy.value_token_ids), policy.pad_token_id)
    policy.model.eval()
    exp = method.compute_advantages(method.compute_values(method.old_forward(exp)))
    exp.ref_log_probs = exp.old_log_probs.clone()  # iteration 0: the reference is the initial policy
    actor = strategy.prepare(policy.model, lr=lr, weight_decay=cfg.weight_decay)
    actor.module.train()
    return Update(actor, method, exp.to(strategy.device), micro_batch_size)


def dealt(batch: Experience, micro_batch_size: int, rank: int, world: int) -> list[tuple[Experience, float]]:
    """Rank ``rank``'s micro-batches of ``batch`` with their loss weights, as :func:`trainers.update.update` runs
    them: the ones :func:`trainers.distributed.deal` gives the rank, each weighted ``len(micro) · world / len(batch)``
    (the strategy averages the ranks' gradients), a zero-weight repeat where a rank has one pass fewer."""
    micros = list(micro_batches(batch, micro_batch_size))
    return [(micro, len(micro) * world / len(batch) if real else 0.0) for _, micro, real in deal(micros, rank, world)]


def update_step(strategy: TrainingStrategy, u: Update) -> float:
    """One optimizer step over this rank's micro-batches; returns the pre-step loss averaged over ranks."""
    from trainers.forward import forward_positions

    total = torch.zeros((), device=strategy.device)
    for micro, weight in dealt(u.batch, u.micro_batch_size, strategy.rank, strategy.world_size):
        with strategy.autocast(), strategy.train_forward(u.actor):
            loss, _ = u.method.actor_loss(micro, forward_positions(u.actor.module, micro, readout=u.method.readout))
        scaled = loss * weight
        strategy.backward(u.actor, scaled)
        total += scaled.detach()
    u.grad_norms.append(strategy.step(u.actor))
    return float(strategy.all_reduce_mean(total))


@torch.no_grad()
def dealt_loss(strategy: TrainingStrategy, u: Update) -> float:
    """The loss on this rank's micro-batches without a step (averaged over ranks)."""
    from trainers.forward import forward_positions

    total = torch.zeros((), device=strategy.device)
    for micro, weight in dealt(u.batch, u.micro_batch_size, strategy.rank, strategy.world_size):
        with strategy.autocast():
            loss, _ = u.method.actor_loss(micro, forward_positions(u.actor.module, micro, readout=u.method.readout))
        total += loss * weight
    return float(strategy.all_reduce_mean(total))


def sapo_update(strategy: TrainingStrategy, lr: float = 1e-4, micro_batch_size: int = 2) -> tuple[float, dict, float]:
    """One SAPO update on this rank's micro-batches: (global loss before, full weights after, global loss after)."""
    u = prepare_update(strategy, lr, micro_batch_size)
    loss = update_step(strategy, u)
    return loss, strategy.full_state_dict(u.actor), dealt_loss(strategy, u)


def resume_gap(strategy: TrainingStrategy, directory: Path, lr: float = 1e-4) -> float:
    """Step, save, step again; then a fresh model loads the save and takes the same second step.

    Returns the largest weight difference between the two second steps (0 when model AND optimizer
    state were restored exactly)."""
    u = prepare_update(strategy, lr)
    update_step(strategy, u)
    strategy.save(u.actor, directory)
    update_step(strategy, u)
    continued = strategy.full_state_dict(u.actor)
    fresh = prepare_update(strategy, lr)
    strategy.load(fresh.actor, directory)
    update_step(strategy, fresh)
    resumed = strategy.full_state_dict(fresh.actor)
    return max(float((continued[k] - resumed[k]).abs().max()) for k in continued)


TRAINER_CHECK: dict[str, Any] = dict(
    env="sapo/Vault-v0",
    model="tiny",
    prompt="plain",
    history_length=0,
    max_response_tokens=8,
    episodes_per_iteration=4,
    micro_batch_size=3,
    minibatches=2,
    lr=1e-3,
    critic_lr=1e-3,
    kl_coef=0.01,
    iterations=3,
    checkpoint_every=0,
    progress=False,
    seed=0,
)
"""The Trainer check's config (micro-batches of 3 rows: the ranks get unequal numbers of them, exercising the padding)."""


def step_capturing(trainer: Any) -> tuple[list[TurnRecord], dict[str, float]]:
    """One iteration of ``trainer`` phase by phase (as ``Trainer.run_iteration``), keeping the gathered turns."""
    from trainers.profiling import MemoryMeter, PhaseTimer

    trainer.start_reinforcement()
    timer, memory = PhaseTimer(trainer.device), MemoryMeter(trainer.device)
    rollout, exp = trainer.collect_batch(timer)
    stats = trainer.learn(exp, timer, memory)
    trainer.sync_generator()
    trainer.iteration += 1
    return rollout.turns, stats


def capture_first_step(trainer: Any) -> dict[str, dict[str, torch.Tensor]]:
    """Keep the gathered weights of the actor (and PPO's critic) after their next optimizer step, under the
    returned dict's ``"actor"`` (``"critic"``) key, and every step's global gradient norm under
    ``"actor_norms"`` (``"critic_norms"``); ``del trainer.strategy.step`` stops it."""
    box: dict[str, dict[str, torch.Tensor]] = {}
    step = trainer.strategy.step

    def first_step_kept(trainable: Any) -> float:
        norm = step(trainable)
        role = "actor" if trainable is trainer.actor else "critic"
        box.setdefault(f"{role}_norms", []).append(norm)  # type: ignore[arg-type]
        if role not in box:  # every rank gets here together: the ZeRO-3 gather is collective
            box[role] = trainer.strategy.full_state_dict(trainable)
        return norm

    trainer.strategy.step = first_step_kept
    return box


def trainer_check(stage: int, out: Path, algo: str = "sapo") -> dict[str, Any]:
    """Iteration 0 (turns captured), a sharded save, a resumed Trainer; iteration 1 on both."""
    from dataclasses import replace

    from trainers.config import TrainConfig
    from trainers.loop import Trainer

    cfg = TrainConfig(**TRAINER_CHECK, algo=algo, strategy="deepspeed", zero_stage=stage, out_dir=str(out / "run"))
    trainer = Trainer(cfg)
    after_first_step = capture_first_step(trainer)
    turns, stats = step_capturing(trainer)
    del trainer.strategy.step  # back to the method
    first = trainer.strategy.full_state_dict(trainer.actor)
    trainer.save()
    rows = [trainer.run_iteration()]  # before the resumed Trainer exists: both share this process's global RNG
    continued = trainer.strategy.full_state_dict(trainer.actor)
    resumed = Trainer(replace(cfg, resume=True))  # restores the RNG states saved after iteration 0
    loaded = resumed.strategy.full_state_dict(resumed.actor)
    rows.append(resumed.run_iteration())
    keep = [{k: v for k, v in r.items() if not k.startswith(("time/", "memory/"))} for r in rows]
    return {
        "turns": turns,
        "stats": stats,
        "weights": first,
        "first_step": after_first_step["actor"],
        "critic_first_step": after_first_step.get("critic"),
        "grad_norms": after_first_step["actor_norms"],
        "loaded": loaded,
        "world_size": trainer.world,
        "rank": trainer.rank,
        "groups": [int(e.group) for e in trainer.vec.envs],
        "rows": keep,
        "continued": continued,
        "resumed": resumed.strategy.full_state_dict(resumed.actor),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("torch", "deepspeed"), default="deepspeed")
    parser.add_argument(
        "--zero-stage", default="2", help="ZeRO stage, or several comma-separated (one launch, one run each)"
    )
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument(
        "--check-resume", action="store_true", help="also check save -> load -> step against continuing"
    )
    parser.add_argument(
        "--trainer", action="store_true", help="check the Trainer (one Vault iteration, resume) instead"
    )
    parser.add_argument("--algo", default="sapo", help="--trainer: the method")
    parser.add_argument("--out", type=Path, required=True, help="writes OUT/zero{stage}/rank{rank}.pt")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    for stage in (int(x) for x in args.zero_stage.split(",")):
        if args.trainer:
            result = trainer_check(stage, args.out / f"trainer{stage}", args.algo)
            torch.save(result, args.out / f"trainer{stage}" / f"rank{result['rank']}.pt")
            print(
                f"Trainer ZeRO-{stage} rank {result['rank']}/{result['world_size']}: loss {result['stats']['actor/loss']:.6f}"
            )
            continue
        strategy = make_strategy(
            StrategyConfig(
                backend=args.backend,
                zero_stage=stage,
                bf16=args.bf16,
                gradient_checkpointing=args.gradient_checkpointing,
            )
        )
        out = args.out / f"zero{stage}"
        out.mkdir(parents=True, exist_ok=True)
        u = prepare_update(strategy, lr=args.lr)  # sapo_update, keeping the step's gradient norm
        loss = update_step(strategy, u)
        weights, after = strategy.full_state_dict(u.actor), dealt_loss(strategy, u)
        gap = resume_gap(strategy, out / "checkpoint", lr=args.lr) if args.check_resume else None
        torch.save(
            {
                "loss": loss,
                "loss_after": after,
                "weights": weights,
                "grad_norm": u.grad_norms[0],
                "world_size": strategy.world_size,
                "resume_gap": gap,
            },
            out / f"rank{strategy.rank}.pt",
        )
        print(
            f"ZeRO-{stage} rank {strategy.rank}/{strategy.world_size}: loss {loss:.6f} -> {after:.6f}"
            + ("" if gap is None else f", resume gap {gap:.3g}")
        )
        strategy.barrier()
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        # Tear the process group down before the interpreter exits: left to exit-time destructors, gloo's
        # threads were now and then destroyed while still joinable ("terminate called without an active
        # exception", SIGABRT after every result was written: a flaky launch).
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
