"""Reading what ``sapo-gym export`` turns into a dataset: an episodes log or a result bundle, and the env they ran in.

:func:`read_source` tells the two apart by their ``format`` field and gives back a :class:`Source`: the env id, spec
hash, protocol, prompt and split the file claims, and its finished episodes as bundle episodes
(:func:`sapo_gym.bundle.episode_dict`). An episodes log must be whole: a torn or damaged line, a line of another
run or an episode logged done twice is refused (a log still being written is finished with ``sapo-gym evaluate
--resume`` first); its ``error`` lines (episodes that failed and were not played again) are counted and skipped. A
bundle is checked as a server checks it (:func:`sapo_gym.bundle.check_bundle`).

:func:`build_env` builds the env the file claims, with the prompt it was played under, and refuses it when the spec
hash built here is not the file's: the file is another env's, another version's, or needs ``--data-dir``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ExportError", "Source", "read_source", "build_env"]


class ExportError(ValueError):
    """The input cannot be exported as it is: the message says why, on one line."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


@dataclass
class Source:
    """What an episodes log or a bundle holds, as far as an export needs it."""

    kind: str
    """``episodes-log`` or ``bundle``."""
    path: str
    env_id: str
    spec_hash: str
    protocol: str
    prompt: str | None
    split: str | None
    dataset: str | None
    env_kwargs: dict[str, Any]
    agent: str | None
    episodes: list[tuple[int | None, dict[str, Any]]] = field(default_factory=list)
    """(slot, bundle episode) of every finished episode, in the file's order (a bundle has no slots: None)."""
    skipped_errors: int = 0
    """Episodes an episodes log holds as ``error`` only (failed, not played again): not exported."""


def _first_line(data: bytes) -> Any:
    try:
        return json.loads(data.split(b"\n", 1)[0].decode("utf-8"))
    except (ValueError, RecursionError):
        return None


def read_source(path: str | Path) -> Source:
    """The :class:`Source` in ``path`` (an episodes log or a bundle); :class:`ExportError` for anything else."""
    from sapo_gym.bundle import BUNDLE_FORMAT
    from sapo_gym.episode_log import LOG_FORMAT

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ExportError(f"cannot read {path}: {exc.strerror or exc}") from None
    head = _first_line(data)
    if isinstance(head, dict) and head.get("format") == LOG_FORMAT:
        return _read_log(str(path), data)
    if isinstance(head, dict) and head.get("format") == BUNDLE_FORMAT or data.lstrip().startswith(b"{"):
        return _read_bundle(str(path), data)
    raise ExportError(f"{path} is neither an episodes log ({LOG_FORMAT}) nor a result bundle ({BUNDLE_FORMAT})")


def _log_episode(entry: Any, where: str, run_id: Any) -> tuple[tuple[int, int] | None, dict[str, Any] | None]:
    """((seed, slot), bundle episode) of a ``done`` line, (None, None) of an ``error`` line; ExportError otherwise."""
    from sapo_gym.bundle import episode_dict

    if not isinstance(entry, dict) or entry.get("status") not in ("done", "error"):
        raise ExportError(f"{where} is not an episode line (status 'done' or 'error')")
    if run_id is not None and entry.get("run_id") != run_id:
        raise ExportError(
            f"{where} belongs to another run (run_id {str(entry.get('run_id'))[:40]!r}, the header's {run_id!r})"
        )
    if entry["status"] == "error":
        return None, None
    try:
        record = entry["record"]
        episode = episode_dict(record)
        key = (int(entry["seed"]), int(entry["slot"]))
        if not all(isinstance(t["output"], str) for t in episode["turns"]):
            raise TypeError("a turn's output is not a string")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ExportError(f"{where} holds no valid episode record ({type(exc).__name__}: {exc})") from None
    return key, episode


def _read_log(path: str, data: bytes) -> Source:
    from sapo_gym.episode_log import LogMismatch, parse_log

    try:
        head, entries, good = parse_log(data)
    except LogMismatch as exc:
        raise ExportError(f"{path} is not a readable episodes log: {exc}") from None
    if data[good:].strip():
        raise ExportError(
            f"{path} line {len(entries) + 2} is truncated or not JSON (a run still going or killed mid-write: "
            "finish it with sapo-gym evaluate ... --resume, then export)"
        )
    run = head.get("run")
    missing = [k for k in ("env_id", "spec_hash", "protocol") if not isinstance((run or {}).get(k), str)]
    if missing:
        raise ExportError(f"{path}: the header's run lacks {', '.join(missing)}")
    kwargs = run.get("env_kwargs") if isinstance(run.get("env_kwargs"), dict) else {}
    source = Source(
        "episodes-log",
        path,
        run["env_id"],
        run["spec_hash"],
        run["protocol"],
        run.get("prompt"),
        run.get("split"),
        run.get("dataset"),
        dict(kwargs),
        run.get("agent") if isinstance(run.get("agent"), str) else None,
    )
    seen: dict[tuple[int, int], int] = {}
    for number, entry in enumerate(entries, start=2):
        key, episode = _log_episode(entry, f"{path} line {number}", head.get("run_id"))
        if key is None:
            continue
        if key in seen:
            raise ExportError(f"{path} line {number}: seed {key[0]} slot {key[1]} is already done at line {seen[key]}")
        seen[key] = number
        source.episodes.append((key[1], episode))
    done = set(seen)
    source.skipped_errors = sum(
        1
        for e in entries
        if isinstance(e, dict) and e.get("status") == "error" and (e.get("seed"), e.get("slot")) not in done
    )
    return source


def _read_bundle(path: str, data: bytes) -> Source:
    from sapo_gym.bundle import BundleError, check_bundle, parse_bundle
    from sapo_gym.registration import ENVS

    try:
        bundle = parse_bundle(data)
        check_bundle(bundle)
    except BundleError as exc:
        raise ExportError(f"{path} is not a valid result bundle: {exc}") from None
    env = bundle["env"]
    kwargs: dict[str, Any] = {"split": env["split"]} if env.get("split") is not None else {}
    entry = ENVS.get(env["id"])
    if entry is None or env["protocol"] != entry.protocol:
        kwargs["protocol"] = env["protocol"]
    return Source(
        "bundle",
        path,
        env["id"],
        env["spec_hash"],
        env["protocol"],
        env.get("prompt"),
        env.get("split"),
        env.get("dataset"),
        kwargs,
        bundle["agent"].get("spec") or bundle["agent"].get("name"),
        [(None, ep) for ep in bundle["episodes"]],
    )


def _make(env_id: str, kwargs: dict[str, Any]) -> Any:
    import gymnasium as gym

    import sapo_gym  # noqa: F401  (registers the ids)

    try:
        return gym.make(env_id, **kwargs)
    except Exception as exc:  # an unknown id, a backend or its data missing here, a bad argument
        raise ExportError(
            f"cannot build {env_id} with {kwargs} to replay the episodes: {type(exc).__name__}: {exc}"
        ) from None


def build_env(source: Source, data_dir: str | None = None) -> Any:
    """The env ``source`` was played in, with its prompt; ExportError when the spec hash built here is not the file's."""
    kwargs = dict(source.env_kwargs)
    if data_dir:
        kwargs["data_dir"] = data_dir
    env = _make(source.env_id, kwargs)
    fields = env.unwrapped.spec_fields()
    if source.prompt is not None and fields.get("prompt") != source.prompt and "prompt" not in kwargs:
        env.close()
        env = _make(source.env_id, {**kwargs, "prompt": source.prompt})
    here = env.unwrapped.spec_hash()
    if here != source.spec_hash:
        env.close()
        raise ExportError(
            f"{source.path} claims {source.env_id} with spec hash {source.spec_hash}, but that env built here "
            f"has {here}: the file is another env's or another version's (or its data needs --data-dir)"
        )
    return env
