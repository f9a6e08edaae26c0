"""Helpers shared by the ALFWorld tests (tests/sapo_gym/alfworld/)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

USER_DATA_VAR = os.environ.get("ALFWORLD_DATA")
"""$ALFWORLD_DATA as the test run was started with: read when this module is first imported (by conftest, before
any test module), since ``import alfworld`` sets the variable to its own cache when it is unset."""

FULL = os.environ.get("SAPO_ALFWORLD_FULL") == "1"
"""Set SAPO_ALFWORLD_FULL=1 to sweep every game instead of a stratified sample."""
FULL_HASHES = {  # sapo/ALFWorld-v0 on the embedded generated-v1 set (env revision 2; the prompt is recorded, not hashed)
    "train": "10f3c6717fe97088",
    "eval_in_distribution": "794a11e908997dbd",
    "eval_out_of_distribution": "d0732503fe1464da",
}
MINI_HASHES = {  # sapo/ALFWorld-Mini-v0 on the embedded generated-mini-v1 set
    "train": "e3251247294b4047",
    "eval_in_distribution": "52ae47ee1157b137",
    "eval_out_of_distribution": "647e37f4907d232d",
}


def stratified(items: list, key: Callable[[Any], Any], per_group: int) -> list:
    """Evenly spaced ``per_group`` items of each group (all of them when SAPO_ALFWORLD_FULL=1)."""
    if FULL:
        return list(items)
    groups: dict = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return [g[i * len(g) // per_group] for g in groups.values() for i in range(min(per_group, len(g)))]


def expert_trajectories(cases: list[tuple[str, dict[str, Any], list[int]]]) -> dict[str, Any]:
    """For each ``(env id, gym.make kwargs, task indices)``: the spec hash, gymnasium's ``check_env`` passed,
    and every expert episode in full (each observation, reward, flag and info, JSON-encoded), following
    ``info["expert_action"]`` (the first admissible action where the expert has none) in the tags protocol.
    Runs the same in any process, so a process without alfworld can be compared with this one."""
    import json
    import warnings

    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    import sapo_gym  # noqa: F401  (registers the ids)

    out: dict[str, Any] = {}
    for env_id, kwargs, indices in cases:
        env = gym.make(env_id, **kwargs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check_env(env.unwrapped, skip_render_check=True)
        episodes = []
        for index in indices:
            obs, info = env.reset(seed=0, options={"task_index": index})
            steps = [json.dumps([obs, info], sort_keys=True, default=repr)]
            done = False
            while not done:
                command = info.get("expert_action") or info["admissible_actions"][0]
                obs, reward, terminated, truncated, info = env.step(f"<think>expert</think><action>{command}</action>")
                steps.append(
                    json.dumps([command, obs, reward, terminated, truncated, info], sort_keys=True, default=repr)
                )
                done = terminated or truncated
            episodes.append({"steps": steps, "won": bool(info.get("won"))})
        out[f"{env_id} {sorted(kwargs.items())}"] = {"spec_hash": env.unwrapped.spec_hash(), "episodes": episodes}
        env.close()
    return out


def find_data() -> Path | None:
    """Real ALFWorld games: the user's $ALFWORLD_DATA, else ../shared/data/alfworld beside the checkout; None when
    neither holds ``json_2.1.1/valid_seen``."""
    for c in (USER_DATA_VAR, Path(__file__).resolve().parents[3] / "shared/data/alfworld"):
        if c and (Path(c) / "json_2.1.1" / "valid_seen").is_dir():
            return Path(c)
    return None


def restore_data_var() -> None:
    """Put $ALFWORLD_DATA back to :data:`USER_DATA_VAR` (undoes ``import alfworld``'s side effect)."""
    if USER_DATA_VAR is None:
        os.environ.pop("ALFWORLD_DATA", None)
    else:
        os.environ["ALFWORLD_DATA"] = USER_DATA_VAR
