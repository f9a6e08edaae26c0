"""The live protocol over HTTP as a test client plays it, a deterministic agent, and the bundle an uninterrupted
run of that agent gives (played offline): what the restart, worker and gunicorn tests compare a live run with."""

from __future__ import annotations

import json
import time
import uuid
import zlib
from typing import Any

import requests

from leaderboard.client import PROXY_RETRY
from tests.support.fake_openai import vault_reply

START = {"env_id": "sapo/Vault-v0", "split": "test", "agent": {"name": "restart survivor"}, "seeds": 1}


def agent(observation: str, who: str = "") -> str:
    """Deterministic in the observation alone: the right button, a wrong one for a third of the observations. ``who``
    goes into its thoughts: agents of other tokens write other outputs, so none plays another's work (which the
    board's ownership rule refuses)."""
    if zlib.crc32(observation.encode()) % 3 == 0:
        return f"<think>{who}a guess</think><action>press nothing</action>"
    return vault_reply(observation).replace("<think>", f"<think>{who}")


def agent_name(who: str = "") -> str:
    """The agent's display name for ``who``: a display name belongs to the first token that used it, so the agents of
    other tokens go by other names."""
    return f"{who}{START['agent']['name']}"


class Client:
    """The live protocol over HTTP, one episode at a time, against whichever server ``url`` names now."""

    def __init__(self, url: str, token: str, who: str = ""):
        self.url, self.headers, self.who = url, {"Authorization": f"Bearer {token}"}, who
        self.run_id: int | None = None
        self.observation, self.episode, self.turn, self.steps = "", -1, 0, 0
        self.last: dict[str, Any] | None = None
        """The last step's request body and answer (to retry it)."""

    retry_seconds = 0.0
    """How long a request is retried through connection failures (a killed server) and the proxy's 502 (a killed
    worker): steps carry their turn and resets their request id, so a retry is answered, not played twice."""

    def post(self, path: str, body: dict[str, Any] | None = None) -> requests.Response:
        deadline = time.monotonic() + self.retry_seconds
        while True:
            try:
                answer = requests.post(
                    f"{self.url}/api/v1/live/runs{path}", json=body or {}, headers=self.headers, timeout=30
                )
                if (
                    answer.status_code not in PROXY_RETRY or time.monotonic() > deadline
                ):  # 502: the worker behind nginx died
                    return answer
            except requests.ConnectionError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.05)

    def start(self) -> dict[str, Any]:
        answer = self.post("", {**START, "agent": {"name": agent_name(self.who)}})
        assert answer.status_code == 201, answer.text
        self.run_id = answer.json()["run_id"]
        return answer.json()

    def play(self, steps: int) -> dict[str, Any] | None:
        """Play ``steps`` more acknowledged steps (dealing episodes as needed); the submission if the run ended."""
        for _ in range(steps):
            if self.last is None or self.last["answer"]["terminated"] or self.last["answer"]["truncated"]:
                dealt = self.post(f"/{self.run_id}/reset", {"request_id": uuid.uuid4().hex})
                assert dealt.status_code == 200, dealt.text
                self.observation, self.episode, self.turn = dealt.json()["observation"], dealt.json()["episode"], 0
            body = {"output": agent(self.observation, self.who), "turn": self.turn, "episode": self.episode}
            answer = self.post(f"/{self.run_id}/step", body)
            assert answer.status_code == 200, answer.text
            self.last, self.steps = {"body": body, "answer": answer.json()}, self.steps + 1
            self.observation, self.turn = answer.json()["observation"], self.turn + 1
            if "submission" in answer.json():
                return answer.json()["submission"]
        return None


def open_runs(live: Any) -> list[int]:
    """Ids of the open runs on the Vault board's live-run list (what ``GET /api/v1/live/runs`` answers), oldest first;
    ``live``: a server's :class:`~leaderboard.server.live.LiveManager`."""
    spec_hash = live.boards.find(START["env_id"], START["split"]).spec_hash
    return sorted(r["run_id"] for r in live.store.live_board(spec_hash)["listed"] if r["status"] == "open")


def uninterrupted(stored: dict[str, Any], who: str = "") -> dict[str, Any]:
    """The bundle the same agent's run of the same (task, seed) pairs gives when nothing interrupts it: played
    offline on a fresh env, built as the server builds a live run's bundle."""
    import gymnasium as gym

    from sapo_gym.bundle import AgentInfo, build_bundle, parse_bundle
    from sapo_gym.records import new_record, record_step

    env = gym.make("sapo/Vault-v0", split="test")
    records = []
    for episode in stored["episodes"]:
        obs, info = env.reset(seed=episode["seed"], options={"task_id": episode["task_id"]})
        record, done = new_record(info, episode["task_id"], episode["seed"]), False
        while not done:
            output = agent(obs, who)
            obs, reward, terminated, truncated, info = env.step(output)
            record_step(record, output, reward, info)
            done = terminated or truncated
        records.append(record)
    env.close()
    spec = env.unwrapped
    bundle = build_bundle(
        records,
        spec.spec_fields(),
        spec.spec_hash(),
        AgentInfo(name=agent_name(who)),
        stored["evaluation"]["seeds"],
        batch_size=1,
        command=stored["evaluation"]["command"],
        created=stored["created"],
    )
    return parse_bundle(json.dumps(bundle))


def stored_bundle(db_url: str, submission_id: int) -> dict[str, Any]:
    from leaderboard.server.store import Store

    store = Store(db_url)
    try:
        return store.bundle_of(store.get(submission_id))
    finally:
        store.engine.dispose()
