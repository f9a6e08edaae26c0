"""The env contract as a user of the installed package meets it, printed as one JSON object.

Run with any interpreter that has ``sapo_gym`` installed (the test of the light install runs it with a
fresh venv's python, outside the checkout): for every registered id and split it makes the env with
``gym.make``, runs gymnasium's ``check_env``, records ``spec_hash()`` and plays expert episodes, each
recorded as the SHA-256 of its every observation, reward, flag and info. Nothing here imports the
repository's tests, so what it measures is the installed wheel.

    python light_contract.py [--vector] [--official]

``--vector`` also plays ``gym.make_vec`` (the ids' vector entry point, sync and async, and gymnasium's own
classes, which must either match or refuse at make time) and checks each step against single envs; ``--official`` adds sapo/ALFWorld-v0 on ``$ALFWORLD_DATA``'s games.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import warnings
from typing import Any

CASES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("sapo/ALFWorld-v0", {"data_dir": "embedded", "split": "eval_out_of_distribution"}),
    ("sapo/ALFWorld-v0", {"data_dir": "embedded", "split": "eval_in_distribution"}),
    ("sapo/ALFWorld-Mini-v0", {"split": "eval_out_of_distribution"}),
    ("sapo/ALFWorld-Mini-v0", {"split": "eval_in_distribution"}),
    ("sapo/WebShop-v0", {"split": "test"}),
    ("sapo/WebShop-v0", {"split": "verl-agent-test"}),
    ("sapo/Vault-v0", {"split": "test"}),
)
"""(id, gym.make kwargs): every env a light install must play, on the boards' splits."""
OFFICIAL = ("sapo/ALFWorld-v0", {"split": "eval_out_of_distribution"})
EPISODES = 2
"""Expert episodes per case (task indices 0 and 1, seed 0)."""


def plain(value: Any) -> Any:
    """A JSON-able copy of an observation or info value (numpy arrays and scalars as lists and numbers)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def record(*parts: Any) -> str:
    return json.dumps(plain(parts), sort_keys=True, ensure_ascii=False, default=repr)


def expert_command(info: dict[str, Any]) -> str:
    """The expert's next action in the tags protocol (a random admissible one when it has none)."""
    command = info.get("expert_action") or (info.get("admissible_actions") or ["look"])[0]
    return f"<think>following the expert plan</think><action>{command}</action>"


def play(env: Any, task_index: int) -> dict[str, Any]:
    digest = hashlib.sha256()
    obs, info = env.reset(seed=0, options={"task_index": task_index})
    digest.update(record(obs, info).encode())
    steps, total, done = 0, 0.0, False
    while not done:
        obs, reward, terminated, truncated, info = env.step(expert_command(info))
        digest.update(record(obs, reward, terminated, truncated, info).encode())
        steps, total, done = steps + 1, total + float(reward), terminated or truncated
    return {"sha256": digest.hexdigest(), "steps": steps, "return": total, "won": bool(info.get("won"))}


def contract(env_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    env = gym.make(env_id, **kwargs)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check_env(env.unwrapped, skip_render_check=True)
        base = env.unwrapped
        return {"spec_hash": base.spec_hash(), "episodes": [play(env, i) for i in range(EPISODES)]}
    finally:
        env.close()


VECTOR_MODES: dict[str, dict[str, Any]] = {
    "entry-sync": {},
    "entry-async": {"vectorization": "async"},
    "gym-sync": {"vectorization_mode": "sync"},
    "gym-async": {"vectorization_mode": "async"},
}
"""``gym.make_vec`` calls a user writes: the ids' vector entry point (no mode) and gymnasium's own two classes."""


def vector_check(env_id: str, kwargs: dict[str, Any], mode: str, num_envs: int = 2, steps: int = 30) -> int | str:
    """Steps of ``gym.make_vec`` in ``mode`` (a :data:`VECTOR_MODES` key) checked equal to ``num_envs`` single envs,
    or ``"refused"`` when gymnasium's own classes refuse the id at make time with a message naming what to use."""
    import gymnasium as gym

    try:
        vec = gym.make_vec(env_id, num_envs=num_envs, **VECTOR_MODES[mode], **kwargs)
    except gym.error.Error as exc:
        if mode.startswith("gym-") and "without vectorization_mode" in str(exc):
            return "refused"
        raise
    singles = [gym.make(env_id, **kwargs) for _ in range(num_envs)]
    try:
        obs, infos = vec.reset(seed=0)
        single = [env.reset(seed=i) for i, env in enumerate(singles)]
        for t in range(steps):
            for i, (o, info) in enumerate(single):
                if obs[i] != o or list(infos["admissible_actions"][i]) != list(info["admissible_actions"]):
                    raise AssertionError(f"{env_id} {mode}: env {i} differs from a single env at step {t}")
                if list(infos["action_mask"][i]) != list(info["action_mask"]):
                    raise AssertionError(f"{env_id} {mode}: env {i}'s action mask differs at step {t}")
            actions = [expert_command(info) if (t + i) % 3 else "junk" for i, (_, info) in enumerate(single)]
            obs, rewards, terms, truncs, infos = vec.step(actions)
            out = [env.step(a) for env, a in zip(singles, actions)]
            for i, (o, r, te, tr, info) in enumerate(out):
                if (float(rewards[i]), bool(terms[i]), bool(truncs[i])) != (float(r), te, tr):
                    raise AssertionError(f"{env_id} {mode}: env {i} reward/flags differ at step {t}")
                single[i] = (o, info)
            if any(terms) or any(truncs):
                return t + 1  # the next step autoresets: tests/sapo_gym/test_gym_make_vec.py checks past it
        return steps
    finally:
        vec.close()
        for env in singles:
            env.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vector", action="store_true", help="also check gym.make_vec in sync and async modes")
    parser.add_argument("--official", action="store_true", help="add ALFWorld-v0 on $ALFWORLD_DATA's games")
    args = parser.parse_args(argv)
    import sapo_gym  # noqa: F401  (registers the ids)

    cases = list(CASES) + ([OFFICIAL] if args.official and os.environ.get("ALFWORLD_DATA") else [])
    out: dict[str, Any] = {"heavy_modules": [], "cases": {}}
    for env_id, kwargs in cases:
        key = f"{env_id}:{kwargs.get('split')}" + (":embedded" if kwargs.get("data_dir") == "embedded" else "")
        out["cases"][key] = contract(env_id, kwargs)
        if args.vector:
            out["cases"][key]["vector_steps"] = {m: vector_check(env_id, kwargs, m) for m in VECTOR_MODES}
    heavy = ("torch", "transformers", "spacy", "thinc", "bm25s", "scipy", "textworld", "alfworld", "flask", "ray")
    out["heavy_modules"] = sorted(m for m in heavy if m in sys.modules)
    print(json.dumps(out, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
