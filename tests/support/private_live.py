"""Live runs on a private board in the leaderboard tests: an agent that follows its own copy of the env's expert
(the test knows the seed)."""

from __future__ import annotations

from typing import Any

SEED = "a7f3c2e9b1d84f6a0c5e2b9d7f1a3c8e4b6d0f2a9c7e5b3d1f8a6c4e2b0d9f7a"
"""A private seed for the tests (any 64 hex digits that pass the seed file's checks)."""
WEBSHOP = "sapo/WebShop-v0"
TASKS = 3


def start(
    client: Any, auth: dict[str, str], env_id: str = WEBSHOP, name: str = "twin", parallel: int = 1
) -> dict[str, Any]:
    run = client.post(
        "/api/v1/live/runs",
        json={"env_id": env_id, "split": "private", "agent": {"name": name}, "parallel": parallel},
        headers=auth,
    )
    assert run.status_code == 201, run.json
    return run.json


def deal(client: Any, auth: dict[str, str], run_id: int) -> dict[str, Any]:
    dealt = client.post(f"/api/v1/live/runs/{run_id}/reset", headers=auth)
    assert dealt.status_code == 200, dealt.json
    return dealt.json


def play(
    client: Any, auth: dict[str, str], seed: str, env_id: str = WEBSHOP, tasks: int = TASKS, name: str = "twin"
) -> dict[str, Any]:
    """A whole live run on ``env_id``'s private board of ``tasks`` tasks; the answer's ``submission``."""
    import gymnasium as gym

    from leaderboard import private

    run = start(client, auth, env_id, name)
    twin = gym.make(env_id, split="private", private_seed=seed, **{private.COUNT_ARGS[env_id]: tasks})
    answer: dict[str, Any] = {}
    try:
        for _ in range(run["episodes"]):
            dealt = deal(client, auth, run["run_id"])
            obs, info = twin.reset(seed=dealt["seed"], options={"task_id": dealt["task_id"]})
            for turn in range(60):
                output = f"<think>follow the plan</think><action>{info['expert_action']}</action>"
                obs, _, terminated, truncated, info = twin.step(output)
                answer = client.post(
                    f"/api/v1/live/runs/{run['run_id']}/step", json={"output": output, "turn": turn}, headers=auth
                ).json
                if terminated or truncated:
                    break
    finally:
        twin.close()
    return answer["submission"]
