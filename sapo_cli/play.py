"""``sapo-gym play ENV_ID``: a person plays one episode in the terminal."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("play", help="play an episode yourself: see the prompt, type an action")
    p.add_argument("env_id")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--task-id", default=None)
    p.add_argument("--split", default=None)
    p.add_argument("--raw", action="store_true", help="type raw model output instead of a bare action")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import sapo_gym  # noqa: F401  (registers the ids)
    from agents.base import format_action

    kwargs = {"split": args.split} if args.split else {}
    env = gym.make(args.env_id, **kwargs)
    options = {"task_id": args.task_id} if args.task_id else None
    obs, info = env.reset(seed=args.seed, options=options)
    total = 0.0
    while True:
        print(obs)
        print(
            "(type an action, 'quit' to stop)"
            + ("" if args.raw else " — it is wrapped in <think></think><action></action>")
        )
        line = sys.stdin.readline()
        if not line or line.strip() == "quit":
            print("bye")
            return 0
        action = line.rstrip("\n") if args.raw else format_action(line.strip(), info=info)
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        print(
            f"\n>>> {info['action']!r}: reward={reward:g} valid={info['is_action_valid']} "
            f"admissible={info['is_action_admissible']} won={info['won']}\n"
        )
        if terminated or truncated:
            print(info["raw_observation"])
            print(f"episode over: {'won' if info['won'] else 'not won'}, return {total:g}, steps {info['step']}")
            return 0
