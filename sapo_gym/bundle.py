"""Result bundles: build them from evaluation records, parse and check them.

A bundle (schema: ``sapo_gym/schema/bundle-v1.json``, documented field by field) holds the
agent's metadata, the env's spec fields and hash, the evaluation settings, every episode with the
agent's raw outputs, and the aggregates. :func:`check_bundle` is everything a server can check
without running the env: strict JSON, the format version, the schema, each episode's internal
consistency and the aggregates (recomputed from the episodes; forged ones are rejected). Replay
(:mod:`leaderboard.replay`) checks the rest.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from sapo_gym.bundle_validation import BundleError, check_unicode, finite_float, make_validator, no_constant, strict_int
from sapo_gym.intervals import clustered_mean_interval, clustered_rate_interval, per_seed_range
from sapo_gym.records import EVERY_TASK, EpisodeRecord, harness_record

__all__ = [
    "BUNDLE_FORMAT",
    "BUNDLE_VERSION",
    "AgentInfo",
    "BundleError",
    "build_bundle",
    "aggregate",
    "parse_bundle",
    "check_bundle",
    "load_schema",
    "evaluation_mode_name",
    "episode_dict",
]

BUNDLE_FORMAT = "sapo-gym-bundle"
BUNDLE_VERSION = 1
_TOLERANCE = 1e-9
SCHEMA_DIR = Path(__file__).resolve().parent / "schema"
"""Where the shipped JSON Schema files live."""


@dataclass
class AgentInfo:
    """Agent metadata shown on the board (``sapo-gym evaluate --agent-*`` flags)."""

    name: str
    """Display name (letters, digits, spaces and ``._+-/@:()[]#``)."""
    model: str | None = None
    """Base model, e.g. ``Qwen2.5-1.5B-Instruct``."""
    parameters: int | None = None
    """Number of model parameters."""
    algorithm: str | None = None
    """Training algorithm, e.g. ``SAPO``."""
    training_budget: str | None = None
    """Free text, e.g. ``150 steps x 16 groups x 8 rollouts``."""
    code_url: str | None = None
    """Link to the code (http/https)."""
    description: str | None = None
    """Anything else worth knowing."""
    decoding: str | None = None
    """Decoding constraint the agent sampled under: 'none' (free) or 'admissible' (actions restricted to each turn's
    admissible list, agents.constraint)."""
    spec: str | None = None
    """The ``--agent`` spec that was evaluated."""
    generation: dict[str, Any] | None = None
    """The agent's settings that can change its outputs (:data:`agents.config.OUTPUT_FIELDS`, as it ran); not a flag."""


@cache
def load_schema(version: int = BUNDLE_VERSION) -> dict[str, Any]:
    """The shipped JSON Schema of bundle format ``version``."""
    return json.loads((SCHEMA_DIR / f"bundle-v{version}.json").read_text())


def episode_dict(record: Any) -> dict[str, Any]:
    """A bundle episode from an :class:`sapo_gym.records.EpisodeRecord` (or its ``to_dict()``): the outcome and
    the turns' outputs, without the accounting."""
    rec = record.to_dict() if isinstance(record, EpisodeRecord) else dict(record)
    turns = [
        {k: t[k] for k in ("output", "action", "think", "valid", "admissible", "observation", "reward")}
        for t in rec["turns"]
    ]
    return {
        "task_id": rec["task_id"],
        "task_type": rec["task_type"],
        "seed": int(rec["seed"]),
        "success": bool(rec["success"]),
        "score": float(rec["score"]),
        "steps": int(rec["steps"]),
        "invalid_actions": int(rec["invalid_actions"]),
        "return": float(rec["episode_return"]),
        "initial_observation": rec["initial_observation"],
        "turns": turns,
    }


def build_bundle(
    records: Sequence[Any],
    spec_fields: Mapping[str, Any],
    spec_hash: str,
    agent: AgentInfo,
    seeds: Sequence[int],
    batch_size: int | None = None,
    command: str | None = None,
    mode: Any = None,
    agent_process: str | None = None,
    created: str | None = None,
) -> dict[str, Any]:
    """A bundle from :class:`sapo_gym.records.EpisodeRecord`s and the env's ``spec_fields()``/``spec_hash()``.

    ``mode``: the :class:`sapo_gym.records.EvaluationMode` that chose the episodes (default ``every-task``).
    ``agent_process``: how the harness ran the agent (``isolated`` / ``in-process``, :mod:`agents.isolated`);
    None leaves ``evaluation.harness.agent_process`` out (not recorded). ``created``: the timestamp to record
    (default now; a resumed evaluation passes its first start's, from the episodes log).
    """
    import sapo_gym

    episodes = [episode_dict(r) for r in records]
    privileged = any(bool(r.privileged if isinstance(r, EpisodeRecord) else dict(r).get("privileged")) for r in records)
    env = {k: spec_fields[k] for k in ("id", "version", "protocol", "horizon", "split", "dataset")}
    env.update({k: spec_fields[k] for k in ("revision", "prompt") if spec_fields.get(k) is not None})
    env["backend"] = {str(k): str(v) for k, v in dict(spec_fields.get("backend") or {}).items()}
    env["spec_hash"] = spec_hash
    agent_dict = {k: v for k, v in asdict(agent).items() if v is not None}
    return {
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "created": created or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "agent": agent_dict,
        "env": env,
        "evaluation": {
            "seeds": [int(s) for s in seeds],
            "batch_size": batch_size,
            "sapo_gym_version": sapo_gym.__version__,
            "command": command,
            "harness": harness_record(privileged, agent_process),
            "mode": (mode or EVERY_TASK).record(),
        },
        "episodes": episodes,
        "aggregates": aggregate(episodes),
    }


def _summary(episodes: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    n = len(episodes)
    wins = sum(1 for e in episodes if e["success"])
    scores = [float(e["score"]) for e in episodes]
    steps = sum(int(e["steps"]) for e in episodes)
    by_task: dict[str, list[float]] = defaultdict(list)
    by_seed: dict[int, list[float]] = defaultdict(list)
    score_by_task: dict[str, list[float]] = defaultdict(list)
    for e in episodes:  # intervals count tasks (independent evidence), not (seed, task) episodes
        by_task[e["task_id"]].append(float(bool(e["success"])))
        score_by_task[e["task_id"]].append(float(e["score"]))
        by_seed[int(e["seed"])].append(float(bool(e["success"])))
    s_lo, s_hi = clustered_rate_interval(by_task)
    c_lo, c_hi = clustered_mean_interval(score_by_task)
    seed_lo, seed_hi = per_seed_range(by_seed)
    return {
        "episodes": n,
        "tasks": len(by_task),
        "seeds": len(by_seed),
        "success": wins / n,
        "success_ci_low": s_lo,
        "success_ci_high": s_hi,
        "score": sum(scores) / n,
        "score_ci_low": c_lo,
        "score_ci_high": c_hi,
        "steps": steps / n,
        "invalid_rate": sum(int(e["invalid_actions"]) for e in episodes) / max(steps, 1),
        "return": sum(float(e["return"]) for e in episodes) / n,
        "success_seed_min": seed_lo,
        "success_seed_max": seed_hi,
    }


def aggregate(episodes: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Per task type (sorted) and ``all``: the bundle's aggregates, as the schema documents them."""
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for ep in episodes:
        groups[ep["task_type"]].append(ep)
    out = {name: _summary(groups[name]) for name in sorted(groups)}
    out["all"] = _summary(episodes)
    return out


def parse_bundle(data: bytes | str) -> dict[str, Any]:
    """Strict JSON: UTF-8, no NaN/Infinity (nor numbers that overflow to it), no integer literal of more
    than 64 digits, no lone surrogate (:mod:`sapo_gym.bundle_validation`: the env server's rules), a top-level object."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        obj = json.loads(text, parse_constant=no_constant, parse_float=finite_float, parse_int=strict_int)
    except UnicodeDecodeError as exc:
        raise BundleError(f"bundle is not UTF-8: {exc}", status=400) from None
    except json.JSONDecodeError as exc:
        raise BundleError(f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", status=400) from None
    except RecursionError:
        raise BundleError("malformed JSON: nested too deeply", status=400) from None
    if not isinstance(obj, dict):
        raise BundleError(f"a bundle is a JSON object, got {type(obj).__name__}", status=400)
    check_unicode(text, obj)
    return obj


@cache
def _validator(version: int = BUNDLE_VERSION) -> Any:
    return make_validator(json.dumps(load_schema(version)))  # strict integers, date-time checked


def _check_schema(bundle: Mapping[str, Any]) -> None:
    import jsonschema

    if bundle.get("format") != BUNDLE_FORMAT:
        raise BundleError(f"not a sapo-gym bundle: 'format' must be {BUNDLE_FORMAT!r}, got {bundle.get('format')!r}")
    if bundle.get("version") != BUNDLE_VERSION:
        raise BundleError(
            f"unsupported bundle version {bundle.get('version')!r}; this server accepts version {BUNDLE_VERSION}"
        )
    error = jsonschema.exceptions.best_match(_validator().iter_errors(bundle))
    if error is not None:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path) or "(top level)"
        raise BundleError(f"schema violation at {where.lstrip('.')}: {error.message[:300]}")


def _check_episode(i: int, ep: Mapping[str, Any]) -> None:
    turns = ep["turns"]
    where = f"episodes[{i}] (task {ep['task_id']!r}, seed {ep['seed']})"
    if ep["steps"] != len(turns):
        raise BundleError(f"{where}: steps={ep['steps']} but it has {len(turns)} turns")
    invalid = sum(1 for t in turns if not t["valid"])
    if ep["invalid_actions"] != invalid:
        raise BundleError(f"{where}: invalid_actions={ep['invalid_actions']} but {invalid} turns are invalid")
    total = math.fsum(float(t["reward"]) for t in turns)
    if not math.isclose(ep["return"], total, rel_tol=_TOLERANCE, abs_tol=_TOLERANCE):
        raise BundleError(f"{where}: return={ep['return']} but the turns' rewards sum to {total}")


def _check_aggregates(bundle: Mapping[str, Any]) -> None:
    expected = aggregate(bundle["episodes"])
    claimed = bundle["aggregates"]
    if set(claimed) != set(expected):
        raise BundleError(
            f"aggregates: categories {sorted(claimed)} do not match the episodes' task types {sorted(expected)}"
        )
    for cat, row in expected.items():
        for key, value in row.items():
            if not math.isclose(claimed[cat][key], value, rel_tol=1e-9, abs_tol=1e-9):
                raise BundleError(
                    f"aggregates[{cat!r}].{key} = {claimed[cat][key]} does not match the episodes ({value}): forged or stale aggregates"
                )


def evaluation_mode_name(bundle: Mapping[str, Any]) -> str:
    """The evaluation mode that chose a bundle's episodes (``every-task`` for bundles from before the field)."""
    return str((bundle["evaluation"].get("mode") or {}).get("name", "every-task"))


def _check_mode(bundle: Mapping[str, Any]) -> None:
    mode = bundle["evaluation"].get("mode") or {}
    if mode.get("name") != "verl-agent":
        return
    for key in ("workers", "seed_offset", "round"):
        if key not in mode:
            raise BundleError(f"evaluation.mode: the verl-agent mode records {key!r}")
    per_seed = Counter(ep["seed"] for ep in bundle["episodes"])
    for seed in bundle["evaluation"]["seeds"]:
        if per_seed[seed] != mode["workers"]:
            raise BundleError(
                f"seed {seed}: {per_seed[seed]} episodes, but the verl-agent mode plays one per worker ({mode['workers']})"
            )


def check_bundle(bundle: Mapping[str, Any]) -> None:
    """Format version, schema, per-episode consistency and recomputed aggregates; raises :class:`BundleError`."""
    _check_schema(bundle)
    for i, ep in enumerate(bundle["episodes"]):
        _check_episode(i, ep)
    seeds = set(bundle["evaluation"]["seeds"])
    stray = sorted({ep["seed"] for ep in bundle["episodes"]} - seeds)
    if stray:
        raise BundleError(f"episodes use seeds {stray} that evaluation.seeds {sorted(seeds)} does not list")
    _check_mode(bundle)
    _check_aggregates(bundle)
