"""Driving an agent through a leaderboard server's live evaluation (``sapo-gym submit --live``).

The server holds the env: it deals the (task, seed) pairs in its own order and answers each raw output
with the next observation and the *public* info (no privileged keys). :func:`play_live` plays a whole
run with any :class:`agents.base.Agent` and returns the submission the server made of it:

* an agent that answers one env at a time (a :class:`~sapo_gym.interfaces.TurnResponder`, as in
  :mod:`sapo_gym.pool`) plays in a pool: the run is started with ``parallel = min(concurrency, the
  server's max_parallel)`` and that many worker threads each play reset → respond → step → … on an
  episode of their own (one episode's requests in turn, the episodes' overlapping). A request's
  ``turn_seed`` is :func:`sapo_gym.pool.turn_seed` of (seed, slot, task, turn): the outputs do not
  depend on which request came back first, nor on the concurrency;
* a batch agent (``act`` only) plays one episode at a time.

A failure in one worker (the agent raised, the server refused) stops the others after their request
in flight; the run is left open on the server, which expires it after its ``idle_seconds`` without
progress (counted as abandoned on the submission page).
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import asdict, dataclass, is_dataclass
from typing import Any

import numpy as np

from leaderboard.client import PROXY_RETRY, SubmitError, response_payload
from sapo_gym.interfaces import BatchActor, EpisodeProgress, TurnResponder

__all__ = ["LiveSession", "LiveResult", "play_live"]


@dataclass(frozen=True)
class LiveResult:
    run_id: int
    episodes: int
    submission: dict[str, Any]
    """``{"id", "status"}`` of the submission (``id`` None and a ``message`` when admission refused it)."""
    url: str | None
    """The submission's page."""
    parallel: int = 1
    """Episodes the run played at once."""


class LiveSession:
    """One live run on ``server`` (``POST /api/v1/live/runs``), step by step; thread-safe (an HTTP session per thread)."""

    def __init__(self, server: str, token: str, timeout: float = 60.0, retries: int = 3):
        self.base = server.rstrip("/") + "/api/v1/live/runs"
        self.server = server.rstrip("/")
        self.token = token
        self.timeout, self.retries = timeout, retries
        self.run: dict[str, Any] | None = None
        self._local = threading.local()

    @property
    def http(self) -> Any:
        import requests

        if not hasattr(self._local, "http"):
            self._local.http = requests.Session()
            self._local.http.headers["Authorization"] = f"Bearer {self.token}"
        return self._local.http

    def _post(self, url: str, body: dict[str, Any]) -> dict[str, Any]:
        import requests

        for attempt in range(self.retries + 1):
            try:
                response = self.http.post(url, json=body, timeout=self.timeout)
            except (
                requests.ConnectionError,
                requests.Timeout,
            ) as exc:  # steps carry their turn: a retry is answered, not replayed
                if attempt == self.retries:
                    raise SubmitError(f"cannot reach {url}: {exc}") from None
            else:
                if response.status_code not in PROXY_RETRY or attempt == self.retries:
                    break
            time.sleep(0.5 * 2**attempt)
        return response_payload(response)

    def limits(self) -> dict[str, Any]:
        """The server's live limits (``max_parallel``, ...); ``{}`` from a server that predates them."""
        import requests

        try:
            response = self.http.get(f"{self.server}/api/v1/live/limits", timeout=self.timeout)
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise SubmitError(f"cannot reach {self.server}: {exc}") from None
        return {} if response.status_code == 404 else response_payload(response)

    def start(
        self, env_id: str, split: str, agent: dict[str, Any], seeds: int = 1, parallel: int | None = None
    ) -> dict[str, Any]:
        body = {
            "env_id": env_id,
            "split": split,
            "agent": agent,
            "seeds": seeds,
            "request_id": uuid.uuid4().hex,
        }  # a retry of this start (its answer lost) gets the same run back
        if parallel is not None:
            body["parallel"] = parallel
        self.run = self._post(self.base, body)
        return self.run

    def reset(self, task_id: str | None = None, seed: int | None = None) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """The next episode the server deals: (observation, info, the whole answer)."""
        assert self.run is not None, "start() first"
        body: dict[str, Any] = {k: v for k, v in (("task_id", task_id), ("seed", seed)) if v is not None}
        body["request_id"] = uuid.uuid4().hex  # a retry of this reset (its answer lost) gets the same episode back
        answer = self._post(f"{self.base}/{self.run['run_id']}/reset", body)
        return answer["observation"], _info(answer["info"]), answer

    def step(self, output: str, turn: int, episode: int | None = None) -> dict[str, Any]:
        """Play ``turn`` of ``episode`` (leave it out while only one episode is in progress)."""
        assert self.run is not None, "start() first"
        body: dict[str, Any] = {"output": output, "turn": turn}
        if episode is not None:
            body["episode"] = episode
        answer = self._post(f"{self.base}/{self.run['run_id']}/step", body)
        answer["info"] = _info(answer["info"])
        return answer


def _info(info: dict[str, Any]) -> dict[str, Any]:
    """The contract's types back (``action_mask`` is a bool array)."""
    if "action_mask" in info:
        info["action_mask"] = np.asarray(info["action_mask"], dtype=bool)
    return info


class _Tally:
    """Turns, episodes and the run's submission, shared by the workers (and the progress line, under a lock)."""

    def __init__(self, episodes: int, max_turns: int, progress: EpisodeProgress | None):
        self.episodes, self.max_turns, self.progress = episodes, max_turns, progress
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.dealt = self.turns = self.finished = 0
        self.error: BaseException | None = None
        self.submission: dict[str, Any] = {}

    def claim(self) -> bool:
        """Whether there is an episode left to ask for (and no worker failed)."""
        with self.lock:
            if self.stop.is_set() or self.dealt >= self.episodes:
                return False
            self.dealt += 1
            if self.progress is not None:
                self.progress.in_flight += 1
            return True

    def turn(self, answer: dict[str, Any], steps: int) -> bool:
        """Count a played turn; whether it ended its episode."""
        ended = bool(answer["terminated"] or answer["truncated"])
        with self.lock:
            self.turns += 1
            self.finished += ended
            if "submission" in answer:
                self.submission = answer["submission"]
            if self.progress is not None:
                self.progress.turn()
                if ended:
                    self.progress.in_flight -= 1
                    self.progress.episode(steps)
            if self.turns > self.max_turns:
                raise SubmitError(f"more than {self.max_turns} turns: stopping (the run expires on the server)")
        return ended

    def failed(self, exc: BaseException) -> None:
        with self.lock:
            if self.error is None:
                self.error = exc
        self.stop.set()


def _play_episode(agent: TurnResponder, session: LiveSession, tally: _Tally, name_episode: bool) -> None:
    from sapo_gym.pool import Job, as_reply, turn_seed

    obs, info, dealt = session.reset()
    job = Job(int(dealt["seed"]), int(dealt.get("slot", 0)), str(dealt["task_id"]))
    episode = dealt["episode"] if name_episode else None
    turn = 0
    while not tally.stop.is_set():
        output = as_reply(agent.respond(obs, info, turn_seed(job, turn)))["output"]
        answer = session.step(output, turn, episode)
        turn += 1
        if tally.turn(answer, turn):
            return
        obs, info = answer["observation"], answer["info"]


def _play_pool(agent: TurnResponder, session: LiveSession, tally: _Tally, width: int) -> None:
    """``width`` workers, each playing the next episode the server deals until none is left."""

    def work() -> None:
        try:
            while tally.claim():
                _play_episode(agent, session, tally, width > 1)
        except BaseException as exc:  # handed to the calling thread; the others stop after their request in flight
            tally.failed(exc)

    threads = [threading.Thread(target=work, daemon=True, name=f"live-{i}") for i in range(width)]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)  # a timeout keeps the calling thread responsive to Ctrl-C
    except BaseException:
        tally.stop.set()
        raise


def _play_batch(agent: BatchActor, session: LiveSession, tally: _Tally) -> None:
    """One episode at a time with ``act`` on a batch of one."""
    while tally.claim():
        agent.reset(1)
        obs, info, _answer = session.reset()
        steps = 0
        while True:
            answer = session.step(agent.act([obs], [info])[0], steps)
            steps += 1
            if tally.turn(answer, steps):
                break
            obs, info = answer["observation"], answer["info"]


def play_live(
    agent: BatchActor | TurnResponder,
    server: str,
    token: str,
    env_id: str,
    split: str,
    agent_info: Any,
    seeds: int = 1,
    max_turns: int = 1_000_000,
    concurrency: int = 1,
    progress: bool = False,
) -> LiveResult:
    """Play every episode of a live run with ``agent`` (a pool of up to ``concurrency`` episodes at once when it
    answers one env at a time, see the module docstring); the server's submission."""
    from sapo_gym.accounting import Progress

    session = LiveSession(server, token)
    info_dict = asdict(agent_info) if is_dataclass(agent_info) else dict(agent_info)
    pooled = isinstance(agent, TurnResponder)
    width = 1
    if pooled and concurrency > 1:
        width = max(1, min(concurrency, int(session.limits().get("max_parallel", 1))))
    run = session.start(
        env_id,
        split,
        {k: v for k, v in info_dict.items() if v is not None},
        seeds,
        parallel=width if width > 1 else None,
    )
    width = max(1, min(width, int(run.get("parallel", 1))))
    reporter = Progress(run["episodes"], label=f"live run {run['run_id']}") if progress else None
    tally = _Tally(run["episodes"], max_turns, reporter)
    try:
        _play_pool(agent, session, tally, width) if pooled else _play_batch(agent, session, tally)
    finally:
        if reporter is not None:
            reporter.close()
    if tally.error is not None:
        exc = tally.error
        what = str(exc) if isinstance(exc, SubmitError) else f"{type(exc).__name__}: {exc}"
        raise SubmitError(
            f"live run {run['run_id']} stopped after {tally.finished} of {run['episodes']} "
            f"episodes: {what}; the run is left to expire on the server",
            getattr(exc, "status", None),
        ) from exc
    submission = tally.submission
    if not submission:  # every episode was played here, yet the server did not finish the run (one is still dealt)
        raise SubmitError(
            f"live run {run['run_id']}: {tally.finished} episodes played and no submission came back "
            "(an episode dealt by a reset whose answer was lost is still open); the run is left to expire"
        )
    url = f"{session.server}/submission/{submission['id']}" if submission.get("id") is not None else None
    return LiveResult(run["run_id"], run["episodes"], submission, url, width)
