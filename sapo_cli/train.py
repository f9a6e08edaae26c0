"""``sapo-gym train``: one registered method (:data:`trainers.method_registry.METHODS`) on a registered env (every
config field is a flag)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from trainers.config import TrainConfig, add_arguments
    from trainers.method_registry import METHODS

    p = sub.add_parser(
        "train",
        help="train an LLM agent with " + ", ".join(e.label for e in METHODS.values()),
        description=(TrainConfig.__doc__ or "") + " Metrics go to OUT_DIR/metrics.jsonl, checkpoints to "
        "OUT_DIR/checkpoints, the final model to OUT_DIR/final; the run ends with an evaluation on the test split. "
        "Several processes: `torchrun --nproc_per_node N -m sapo_cli train --strategy deepspeed ...` (docs/scale_out.md).",
    )
    add_arguments(p)
    p.add_argument("--eval-split", default="test", help="split evaluated after training ('' skips the evaluation)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json

    from sapo_gym.evaluation import format_table
    from trainers.config import from_args
    from trainers.hf_export import export_policy
    from trainers.loop import Trainer
    from trainers.policy_evaluation import evaluate

    cfg = from_args(args)
    trainer = Trainer(cfg)
    rows = trainer.train()
    export_policy(trainer, trainer.out_dir / "final")
    if not trainer.is_main:  # under torchrun: rank 0 reports and evaluates
        return 0
    played = [row for row in rows if "rollout/success" in row]  # not an iteration whose episodes were all lost
    if played:
        last = played[-1]
        print(
            f"{cfg.algo}: {len(rows)} iterations, last rollout success {last['rollout/success']:.2f}, "
            f"{last['time/iteration']:.2f} s/iteration; metrics: {trainer.out_dir / 'metrics.jsonl'}"
        )
    if args.eval_split:
        # Said before it starts: on WebShop-v0 an untrained model plays 500 goals x 15 turns of up to
        # --max-response-tokens each here, minutes that read as a slow iteration otherwise
        print(
            f"{cfg.algo}: evaluating every task of split {args.eval_split!r} once (--eval-split '' skips it)",
            flush=True,
        )
        summary = evaluate(trainer, split=args.eval_split)
        print(
            format_table(summary, title=f"{cfg.env} · split={args.eval_split} · {cfg.algo} · T={cfg.eval_temperature}")
        )
        (trainer.out_dir / "eval.json").write_text(json.dumps(summary, indent=1))
    return 0
