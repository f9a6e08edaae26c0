"""Replay verification: re-execute every episode's raw outputs in the env and compare outcomes.

The envs are deterministic given the actions, so a bundle is *verified* only if, for every
episode, resetting to its task with its seed and stepping its recorded outputs reproduces the
initial observation, every turn (parsed action, think, validity, admissibility, observation,
reward), the episode's end exactly at its last turn, and its success, score, steps, invalid
actions and return.

A verdict is the submission's, never the verifier's set-up: a verifier that cannot build the board's
env as the board has it (a backend or data missing, no private seed, another private task count or
WebShop noun rule: an env whose spec hash is not the board's) raises :class:`SetupError` and records
nothing against the submission (:attr:`ReplayResult.verifiable` False; the server's worker leaves it
pending, "not verifiable here").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from leaderboard.boards import make_env

__all__ = ["ReplayResult", "SetupError", "SETUP_ERRORS", "board_env", "replay_episode", "replay_bundle"]

_TURN_KEYS = ("action", "think", "valid", "admissible", "observation", "reward")


SETUP_ERRORS = (ImportError, OSError, MemoryError)
"""Exceptions of an env that say the machine lacks something (a module, a file, memory), not that the episode differs."""


class SetupError(Exception):
    """This verifier cannot reproduce the board's env: no verdict on the submission can come from it."""


@dataclass(frozen=True)
class ReplayResult:
    verified: bool
    episodes: int
    """Episodes replayed (all of them when verified, up to the first mismatch otherwise)."""
    message: str
    verifiable: bool = True
    """False: the verifier could not build the board's env (:class:`SetupError`): not verified, and not failed either."""


def board_env(env_id: str, split: str | None, spec_hash: str) -> Any:
    """The env of board ``spec_hash``, built here; :class:`SetupError` when it cannot be built or is another board's."""
    try:
        env = make_env(env_id, split)
    except Exception as exc:  # a backend, its data or the private seed is missing here
        raise SetupError(f"this verifier cannot build {env_id}:{split}: {type(exc).__name__}: {exc}") from None
    here = env.unwrapped.spec_hash()
    if here != spec_hash:
        env.close()
        raise SetupError(
            f"this verifier's {env_id}:{split} env has spec hash {here}, the board's is {spec_hash} (another "
            "private seed or task count, noun rule or backend version here)"
        )
    return env


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return (
            isinstance(a, (int, float))
            and isinstance(b, (int, float))
            and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
        )
    return a == b


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def replay_episode(env: Any, episode: Mapping[str, Any]) -> str | None:
    """Replay one bundle episode in ``env``; None when everything matches, else what differs."""
    obs, info = env.reset(seed=episode["seed"], options={"task_id": episode["task_id"]})
    if info["task_type"] != episode["task_type"]:
        return f"task_type is {info['task_type']!r}, bundle says {episode['task_type']!r}"
    if info["raw_observation"] != episode["initial_observation"]:
        return f"initial observation differs: env {_short(info['raw_observation'])}"
    turns = episode["turns"]
    ret, invalid, done = 0.0, 0, False
    for k, turn in enumerate(turns):
        if done:
            return f"the episode ended after {k} steps, the bundle has {len(turns)}"
        _, reward, terminated, truncated, info = env.step(turn["output"])
        actual = {
            "action": info["action"],
            "think": info.get("think"),
            "valid": bool(info["is_action_valid"]),
            "admissible": bool(info["is_action_admissible"]),
            "observation": info["raw_observation"],
            "reward": float(reward),
        }
        for key in _TURN_KEYS:
            if not _same(actual[key], turn[key]):
                return f"step {k + 1}: {key} is {_short(actual[key])}, bundle says {_short(turn[key])}"
        ret += float(reward)
        invalid += not actual["valid"]
        done = terminated or truncated
    if not done:
        return f"the bundle stops after {len(turns)} steps but the episode was not over"
    outcome = {
        "success": bool(info["won"]),
        "score": float(info["score"]),
        "steps": len(turns),
        "invalid_actions": invalid,
        "return": ret,
    }
    for key, value in outcome.items():
        if not _same(value, episode[key]):
            return f"{key} is {value}, bundle says {episode[key]}"
    return None


def replay_bundle(bundle: Mapping[str, Any], progress: Callable[[int], None] | None = None) -> ReplayResult:
    """Replay every episode of ``bundle`` in a fresh env of its id and split; stop at the first mismatch. An env this
    machine cannot build as the bundle's board has it gives ``verifiable=False``, not a failure."""
    try:
        env = board_env(bundle["env"]["id"], bundle["env"]["split"], bundle["env"]["spec_hash"])
    except SetupError as exc:
        return ReplayResult(False, 0, str(exc), verifiable=False)
    try:
        episodes = bundle["episodes"]
        for i, ep in enumerate(episodes):
            try:
                problem = replay_episode(env, ep)
            except SETUP_ERRORS as exc:
                return ReplayResult(
                    False, i, f"this verifier failed to run the env: {type(exc).__name__}: {exc}", verifiable=False
                )
            if problem is not None:
                return ReplayResult(False, i + 1, f"episode {i} (task {ep['task_id']}, seed {ep['seed']}): {problem}")
            if progress is not None:
                progress(i + 1)
        return ReplayResult(True, len(episodes), f"all {len(episodes)} episodes reproduced exactly")
    finally:
        env.close()
