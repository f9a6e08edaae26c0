"""``sapo-gym envs``: list the registered ids, each with what it needs beside ``pip install sapo-gym`` and
whether it is usable here (each import its extras provide is tried), its splits, their task counts here and
the default evaluation split.

The counts are those of the data this machine resolves (official ALFWorld games or the embedded generated
set, WebShop's files or the generated catalog): each split is built once, raw (no prompt, no game loaded).
"""

from __future__ import annotations

import argparse
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sapo_gym.registration import EnvEntry


@dataclass(frozen=True)
class SplitCount:
    """One split of an env as this machine resolves it."""

    split: str
    tasks: int | None
    """Tasks in the split, None when it could not be built."""
    dataset: str
    """``spec_fields()["dataset"]``, or why the split could not be built."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "envs",
        help="list registered env ids: horizon, protocol, data, what each needs and whether it "
        "is usable here, splits with their task counts, default evaluation split",
    )
    p.add_argument("--no-counts", action="store_true", help="list the split names only (build nothing)")
    p.set_defaults(func=run)


def count_split(env_id: str, split: str | None) -> SplitCount:
    """Build ``env_id`` raw on ``split`` (None: its default) and count its tasks."""
    import gymnasium as gym

    import sapo_gym  # noqa: F401  (registers the ids)

    kwargs = {"prompt": None} if split is None else {"prompt": None, "split": split}
    try:
        with warnings.catch_warnings():  # e.g. ALFWORLD_DATA without a train folder: the dataset column says it
            warnings.simplefilter("ignore")
            env = gym.make(env_id, **kwargs)
    except Exception as exc:  # a missing backend package or data set only marks that split
        return SplitCount(split or "(default)", None, f"unavailable: {type(exc).__name__}: {str(exc)[:240]}")
    try:
        base = env.unwrapped
        return SplitCount(base.split, len(base.task_ids), str(base.spec_fields()["dataset"]))
    finally:
        env.close()


def needs_lines(entry: EnvEntry, rows: list[SplitCount]) -> list[str]:
    """``needs:``, ``optional:`` and ``usable here:`` lines of ``entry`` (:meth:`EnvEntry.unusable`; also not
    usable when no split of ``rows``, those counted, could be built)."""
    from sapo_gym.extras import install_command

    needs = [install_command(*entry.needs)] if entry.needs else []
    needs += [path for path, _ in entry.programs]
    lines = [f"    needs: {', '.join(needs) if needs else 'nothing beyond pip install sapo-gym'}"]
    lines += [f"    optional: {install_command(extra)} for {features}" for extra, features in entry.optional]
    why = entry.unusable()
    if why is None and rows and all(row.tasks is None for row in rows):
        why = rows[0].dataset
    lines.append("    usable here: yes" if why is None else f"    usable here: no, {why}")
    return lines


def run(args: argparse.Namespace) -> int:
    from sapo_gym.registration import ENVS

    for e in ENVS.values():
        print(
            f"{e.env_id:<26} horizon={e.horizon:<3} protocol={e.protocol}\n    {e.description}\n    data: {e.dataset}"
        )
        names = e.split_names()
        rows = [] if args.no_counts else [count_split(e.env_id, s) for s in names] or [count_split(e.env_id, None)]
        print("\n".join(needs_lines(e, rows)))
        if args.no_counts:
            print(f"    splits: {', '.join(names) or '(the default one)'}")
        for row in rows:
            tasks = "-" if row.tasks is None else f"{row.tasks:,}"
            print(f"    split {row.split:<26} {tasks:>7} tasks  {row.dataset}")
        default = e.eval_splits[0] if e.eval_splits else "(the env's default split)"
        others = ", ".join(e.eval_splits[1:])
        print(f"    default evaluation split: {default}" + (f" (also evaluated: {others})" if others else ""))
    return 0
