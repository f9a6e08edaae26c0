"""What the verifiers and SkyRL adapters share: the task rows they play, one episode played from an ecosystem's
replies, and the episodes read back out of that ecosystem's output for a result bundle. No ecosystem package is
imported here.

**A task row** (:func:`task_rows`) is a plain JSON object that names one episode and carries the env's identity
into the ecosystem's own metadata (a verifiers task's ``info``, a SkyRL dataset row's ``extra_info``):
:data:`ROW_KEYS` — ``env_id``, ``split``, ``task_id``, ``seed``, ``env_args`` (the other ``gym.make`` arguments),
``protocol``, ``horizon``, ``spec_hash``, ``prompt_template``. The rows of a split are every task once per seed
(the ``every-task`` mode the boards rank), in the split's order.

**An episode** (:class:`EpisodePlay`) is ``gym.make(env_id, split=..., **env_args).reset(seed=seed,
options={"task_id": task_id})`` then one ``step`` per reply, recorded as :mod:`sapo_gym.evaluation` records it
(:func:`~sapo_gym.records.new_record`, :func:`~sapo_gym.records.record_step`): the same env, the same
replies, the same observations, rewards and outcome as in-process play. The env is built with its spec hash
checked against the row's, so a row never plays on another board's env. What leaves with the episode is
:meth:`EpisodePlay.payload`: the record, the env's spec fields and hash, and whether the episode ended (an
ecosystem's own turn limit or a failed model call can stop it before the env does).

**Back to the boards**: :func:`read_payloads` finds those payloads in any JSON Lines output (verifiers'
``traces.jsonl``, the SkyRL env's ``record_path`` file) and :func:`bundle_inputs` checks them into what
``sapo_gym.bundle.build_bundle`` takes (``sapo-gym bundle``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

from sapo_gym.bounds import bound_output
from sapo_gym.records import EpisodeRecord, new_record, record_step

__all__ = [
    "ROW_KEYS",
    "PAYLOAD_KEY",
    "PAYLOAD_FORMAT",
    "make_env",
    "env_identity",
    "task_rows",
    "EpisodePlay",
    "episode_metrics",
    "read_payloads",
    "bundle_inputs",
]

ROW_KEYS: tuple[str, ...] = (
    "env_id",
    "split",
    "task_id",
    "seed",
    "env_args",
    "protocol",
    "horizon",
    "spec_hash",
    "prompt_template",
)
"""The keys of a task row, in order (see the module docstring)."""
PAYLOAD_KEY = "sapo_gym"
"""The key an adapter files :meth:`EpisodePlay.payload` under in its ecosystem's metadata."""
PAYLOAD_FORMAT = "sapo-gym-episode"


def make_env(env_id: str, split: str | None = None, env_args: dict[str, Any] | None = None) -> gym.Env:
    """``gym.make(env_id, split=split, **env_args)`` (``split`` None: the env's default split)."""
    kwargs = dict(env_args or {})
    if split is not None:
        kwargs["split"] = split
    return gym.make(env_id, **kwargs)


def env_identity(env: gym.Env) -> dict[str, Any]:
    """What travels with every row and episode of ``env``: protocol, split, horizon, spec hash, prompt template."""
    fields = env.unwrapped.spec_fields()
    return {
        "protocol": fields["protocol"],
        "split": fields["split"],
        "horizon": fields["horizon"],
        "spec_hash": env.unwrapped.spec_hash(),
        "prompt_template": fields["prompt"],
    }


def task_rows(
    env_id: str,
    split: str | None = None,
    seeds: Sequence[int] = (0,),
    env_args: dict[str, Any] | None = None,
    limit: int | None = None,
) -> list[tuple[dict[str, Any], str]]:
    """``(row, first observation)`` for every task of ``split`` (its first ``limit``) once per seed, seeds outermost."""
    args = {k: v for k, v in dict(env_args or {}).items() if k != "split"}
    env = make_env(env_id, split, args)
    try:
        identity = env_identity(env)
        ids = list(env.unwrapped.task_ids)[:limit]
        out = []
        for seed in seeds:
            for task_id in ids:
                obs, _ = env.reset(seed=int(seed), options={"task_id": task_id})
                row = {"env_id": env_id, "task_id": task_id, "seed": int(seed), "env_args": args, **identity}
                out.append(({k: row[k] for k in ROW_KEYS}, obs))
        return out
    finally:
        env.close()


class EpisodePlay:
    """One episode of a task row, stepped with an ecosystem's replies and recorded (see the module docstring)."""

    def __init__(self, row: dict[str, Any]):
        self.row = {k: row[k] for k in ROW_KEYS}
        self.env = make_env(row["env_id"], row["split"], row["env_args"])
        here = self.env.unwrapped.spec_hash()
        if here != row["spec_hash"]:
            self.env.close()
            raise ValueError(
                f"{row['env_id']}:{row['split']} builds spec hash {here} here, the task row was planned on "
                f"{row['spec_hash']} (another backend, data or env arguments)"
            )
        self.observation, info = self.env.reset(seed=int(row["seed"]), options={"task_id": row["task_id"]})
        self.info: dict[str, Any] = info
        self.record: EpisodeRecord = new_record(info, row["task_id"], int(row["seed"]))
        self.done = False

    def step(self, reply: str) -> tuple[str, float, bool]:
        """Step the env with ``reply`` (the model's raw text); ``(next observation, reward, episode over)``."""
        if self.done:
            raise RuntimeError(f"episode {self.row['task_id']} (seed {self.row['seed']}) is over")
        reply = bound_output(reply)
        self.observation, reward, terminated, truncated, self.info = self.env.step(reply)
        record_step(self.record, reply, reward, self.info)
        self.done = bool(terminated or truncated)
        return self.observation, float(reward), self.done

    def payload(self) -> dict[str, Any]:
        """The episode as it leaves with the ecosystem's output: read back by :func:`read_payloads`."""
        unwrapped = self.env.unwrapped
        return {
            "format": PAYLOAD_FORMAT,
            "row": self.row,
            "complete": self.done,
            "spec_fields": unwrapped.spec_fields(),
            "spec_hash": unwrapped.spec_hash(),
            "record": self.record.to_dict(),
        }

    def close(self) -> None:
        self.env.close()


def episode_metrics(record: EpisodeRecord) -> dict[str, float]:
    """The episode's numbers for an ecosystem's metrics: success, score, return, steps, invalid actions, and the
    success under the task's category (``success/<task_type>``, averaged over that category's episodes alone)."""
    return {
        "success": float(record.success),
        "score": record.score,
        "return": record.episode_return,
        "steps": float(record.steps),
        "invalid_actions": float(record.invalid_actions),
        f"success/{record.task_type}": float(record.success),
    }


def _payloads_in(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        found = value.get(PAYLOAD_KEY)
        if isinstance(found, dict) and found.get("format") == PAYLOAD_FORMAT:
            yield found
        for key, item in value.items():
            if key != PAYLOAD_KEY:
                yield from _payloads_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from _payloads_in(item)


def read_payloads(path: str | Path) -> list[dict[str, Any]]:
    """Every episode payload in the JSON Lines file at ``path``, in file order, wherever a line nests it."""
    out: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if line.strip():
                try:
                    out.extend(_payloads_in(json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{number}: not JSON ({exc})") from None
    return out


def bundle_inputs(payloads: Iterable[dict[str, Any]]) -> tuple[dict[str, Any], str, list[EpisodeRecord], list[int]]:
    """``(spec_fields, spec_hash, records, seeds)`` of whole episodes of one env, each (seed, task) once; a
    ValueError says what keeps the payloads from one bundle."""
    payloads = list(payloads)
    if not payloads:
        raise ValueError("no sapo_gym episodes found (an adapter files them under 'sapo_gym' in its output)")
    hashes = sorted({p["spec_hash"] for p in payloads})
    if len(hashes) > 1:
        raise ValueError(f"episodes of {len(hashes)} envs (spec hashes {hashes}): one bundle holds one env's")
    cut = [p["row"] for p in payloads if not p["complete"]]
    if cut:
        raise ValueError(
            f"{len(cut)} episode(s) did not end (e.g. task {cut[0]['task_id']}, seed {cut[0]['seed']}): the "
            "ecosystem's turn limit or a failed model call stopped them, and a bundle holds whole episodes"
        )
    twice = [key for key, n in Counter((p["row"]["seed"], p["row"]["task_id"]) for p in payloads).items() if n > 1]
    if twice:
        raise ValueError(
            f"{len(twice)} (seed, task) pairs have several rollouts (e.g. {twice[0]}): a bundle holds one "
            "episode per task and seed"
        )
    records = [EpisodeRecord.from_dict(p["record"]) for p in payloads]
    seeds = sorted({r.seed for r in records})
    return payloads[0]["spec_fields"], hashes[0], records, seeds
