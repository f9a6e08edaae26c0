"""Driving an agent through a leaderboard server's live evaluation (``sapo-gym submit --live``).

The server holds the env: it deals the (task, seed) pairs in its own order, one episode at a time,
and answers each raw output with the next observation and the *public* info (no privileged keys).
:func:`play_live` plays a whole run with any :class:`agents.base.Agent` and returns the submission
the server made of it.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from leaderboard.client import SubmitError, response_payload

__all__ = ["LiveSession", "LiveResult", "play_live"]


@dataclass(frozen=True)
class LiveResult:
    run_id: int
    episodes: int
    submission: dict[str, Any]
    """``{"id", "status"}`` of the submission (``id`` None and a ``message`` when admission refused it)."""
    url: str | None
    """The submission's page."""


class LiveSession:
    """One live run on ``server`` (``POST /api/v1/live/runs``), step by step."""

    def __init__(self, server: str, token: str, timeout: float = 60.0, retries: int = 3):
        import requests

        self.base = server.rstrip("/") + "/api/v1/live/runs"
        self.server = server.rstrip("/")
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Bearer {token}"
        self.timeout, self.retries = timeout, retries
        self.run: dict[str, Any] | None = None

    def _post(self, url: str, body: dict[str, Any]) -> dict[str, Any]:
        import requests

        for attempt in range(self.retries + 1):
            try:
                response = self.http.post(url, json=body, timeout=self.timeout)
                break
            except (requests.ConnectionError, requests.Timeout) as exc:  # steps carry their turn: a retry is answered, not replayed
                if attempt == self.retries:
                    raise SubmitError(f"cannot reach {url}: {exc}") from None
                time.sleep(0.5 * 2**attempt)
        return response_payload(response)

    def start(self, env_id: str, split: str, agent: dict[str, Any], seeds: int = 1) -> dict[str, Any]:
        self.run = self._post(self.base, {"env_id": env_id, "split": split, "agent": agent, "seeds": seeds})
        return self.run

    def reset(self, task_id: str | None = None, seed: int | None = None) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """The next episode the server deals: (observation, info, the whole answer)."""
        assert self.run is not None, "start() first"
        body = {k: v for k, v in (("task_id", task_id), ("seed", seed)) if v is not None}
        answer = self._post(f"{self.base}/{self.run['run_id']}/reset", body)
        return answer["observation"], _info(answer["info"]), answer

    def step(self, output: str, turn: int) -> dict[str, Any]:
        assert self.run is not None, "start() first"
        answer = self._post(f"{self.base}/{self.run['run_id']}/step", {"output": output, "turn": turn})
        answer["info"] = _info(answer["info"])
        return answer


def _info(info: dict[str, Any]) -> dict[str, Any]:
    """The contract's types back (``action_mask`` is a bool array)."""
    if "action_mask" in info:
        info["action_mask"] = np.asarray(info["action_mask"], dtype=bool)
    return info


def play_live(agent: Any, server: str, token: str, env_id: str, split: str, agent_info: Any, seeds: int = 1,
              max_turns: int = 1_000_000) -> LiveResult:
    """Play every episode of a live run with ``agent`` (one env at a time); the server's submission."""
    session = LiveSession(server, token)
    info_dict = asdict(agent_info) if hasattr(agent_info, "__dataclass_fields__") else dict(agent_info)
    run = session.start(env_id, split, {k: v for k, v in info_dict.items() if v is not None}, seeds)
    submission: dict[str, Any] = {}
    turns = 0
    for _ in range(run["episodes"]):
        agent.reset(1)
        obs, info, _answer = session.reset()
        turn = 0
        while True:
            answer = session.step(agent.act([obs], [info])[0], turn)
            turn, turns = turn + 1, turns + 1
            if turns > max_turns:
                raise SubmitError(f"more than {max_turns} turns: stopping (the run expires on the server)")
            if answer["terminated"] or answer["truncated"]:
                submission = answer.get("submission", submission)
                break
            obs, info = answer["observation"], answer["info"]
    url = f"{session.server}/submission/{submission['id']}" if submission.get("id") is not None else None
    return LiveResult(run["run_id"], run["episodes"], submission, url)
