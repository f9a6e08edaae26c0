"""``sapo-gym leaderboard private reveal|check``, and the private-seed options of ``serve`` and ``verify``.

* ``reveal --private-seed-file PATH`` (admin, when the split is retired): prints the seed and its commitment.
* ``check --seed HEX --commitment HEX [--env ID] [--tasks N]`` (anyone): checks the seed against the
  published commitment, regenerates each private split from it and prints its spec hash, to compare with
  the board's (``--tasks``: the board's number of tasks, when the server did not use the env's default).
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_seed_options", "activate_from_args", "register_private"]


def add_seed_options(p: argparse.ArgumentParser) -> None:
    """``--private-seed-file``, ``--private-env`` and ``--private-tasks`` (serve, verify)."""
    p.add_argument(
        "--private-seed-file",
        default=None,
        metavar="PATH",
        help="host private boards generated from the secret in PATH (created, mode 0600, when absent); "
        "never served or logged (see docs/leaderboard.md, 'Private split')",
    )
    p.add_argument(
        "--private-env",
        action="append",
        default=None,
        metavar="ENV_ID",
        help="envs given a private board (repeatable; default: sapo/ALFWorld-Mini-v0 and sapo/WebShop-v0)",
    )
    p.add_argument(
        "--private-tasks",
        type=int,
        default=None,
        metavar="N",
        help="tasks per private split (default: 24 ALFWorld-Mini games, 100 WebShop goals)",
    )


def activate_from_args(args: argparse.Namespace) -> str | None:
    """Read (or create) the seed file and make it this process's secret; the seed, or None without the option."""
    if not getattr(args, "private_seed_file", None):
        return None
    from leaderboard import private

    seed = private.read_seed_file(args.private_seed_file)
    active = private.activate(seed, args.private_env, args.private_tasks)
    print(f"private boards {', '.join(active.board_keys())}: commitment {active.commitment}", flush=True)
    return seed


def register_private(cmds: argparse._SubParsersAction) -> None:
    p = cmds.add_parser("private", help="reveal the private split's seed (admin), or check a revealed one (anyone)")
    acts = p.add_subparsers(dest="private_command", required=True, metavar="ACTION")
    r = acts.add_parser("reveal", help="print the secret seed and its commitment (only when the split is retired)")
    r.add_argument("--private-seed-file", required=True, metavar="PATH")
    r.set_defaults(func=_reveal)
    c = acts.add_parser("check", help="check a revealed seed against the commitment and print the splits' spec hashes")
    c.add_argument("--seed", required=True, metavar="HEX")
    c.add_argument("--commitment", required=True, metavar="HEX")
    c.add_argument("--env", action="append", default=None, metavar="ENV_ID", help="envs to regenerate (default: all)")
    c.add_argument("--tasks", type=int, default=None, metavar="N", help="tasks per split, as the board has them")
    c.set_defaults(func=_check)


def _reveal(args: argparse.Namespace) -> int:
    from leaderboard import private

    seed = private.read_seed_file(args.private_seed_file, create=False)
    print(
        "revealing the private split's seed: retire its boards (serve without --private-seed-file) "
        "before publishing it",
        file=sys.stderr,
    )
    print(f"seed {seed}\ncommitment {private.commitment(seed)}")
    return 0


def _check(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import sapo_gym  # noqa: F401  (registers the ids)
    from leaderboard import private

    try:
        ok = private.commitment(args.seed) == args.commitment.strip().lower()
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"commitment {'matches' if ok else 'DOES NOT MATCH'} the seed")
    if not ok:
        return 1
    unknown = sorted(set(args.env or ()) - set(private.COUNT_ARGS))
    if unknown:
        print(f"error: no private split for {unknown}; valid choices: {list(private.COUNT_ARGS)}", file=sys.stderr)
        return 2
    for env_id in args.env or list(private.COUNT_ARGS):
        count = {private.COUNT_ARGS[env_id]: args.tasks} if args.tasks is not None else {}
        env = gym.make(env_id, prompt=None, split=private.PRIVATE_SPLIT, private_seed=args.seed, **count)
        try:
            base = env.unwrapped
            print(
                f"{env_id:<24} {private.PRIVATE_SPLIT} {len(base.task_ids):>4} tasks  spec {base.spec_hash()}  "
                f"dataset {base.spec_fields()['dataset']}"
            )
        finally:
            env.close()
    return 0
