"""Bad input stays bounded on the small path and the full path alike: a 10,000-word search, a 1 MB action, thousands
of shop sessions opened and dropped, thousands of episodes. (The same inputs at 1.18 M products, timed and with
the memory they add, are in ``benchmarks/webshop_scale.py``.)"""

from __future__ import annotations

import gc
import json

import pytest

from sapo_gym.webshop.app import MAX_SESSIONS, create_app
from sapo_gym.webshop.dataset import CATALOGS, HUMAN_FILE
from sapo_gym.webshop.env import WebShopEnv
from sapo_gym.webshop.generate import generate_raw
from sapo_gym.webshop.search import SearchIndex, shared_index
from sapo_gym.webshop.shop import MAX_QUERY_CHARS, ShopSession

HUGE = 1 << 20


@pytest.fixture(scope="module", params=["small", "full"])
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> WebShopEnv:
    if request.param == "small":
        return WebShopEnv(split="test")
    folder = tmp_path_factory.mktemp("full")
    for name, blob in zip((*CATALOGS["full"], HUMAN_FILE), generate_raw(1000)):
        (folder / name).write_text(json.dumps(blob))
    return WebShopEnv(data_dir=folder, catalog="full", split="test")


@pytest.fixture
def searches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = SearchIndex.search

    def spy(self: SearchIndex, query: str, k: int = 50) -> list[str]:
        calls.append(query)
        return real(self, query, k)

    monkeypatch.setattr(SearchIndex, "search", spy)
    return calls


@pytest.mark.parametrize(
    "action",
    [
        "search[" + " ".join(["shoes"] * 10_000) + "]",  # 10,000 words: past the query cap, so never searched
        "search[" + "a" * HUGE + "]",
        "click[" + "a" * HUGE + "]",
        "x" * HUGE,
    ],
)
def test_an_oversized_action_changes_nothing_and_searches_nothing(
    env: WebShopEnv, searches: list[str], action: str
) -> None:
    obs, info = env.reset(options={"task_index": 3})
    after, reward, terminated, truncated, info_after = env.step(f"<action>{action}</action>")
    assert len(action) > MAX_QUERY_CHARS and searches == []
    assert (after, reward, terminated, truncated) == (obs, 0.0, False, False)
    assert info_after["is_action_admissible"] is False and info_after["raw_observation"] == info["raw_observation"]
    query = env.goal(3).query
    env.step(f"<action>search[{query}]</action>")  # the env still searches what it should
    assert searches == [query]


def test_thousands_of_sessions_opened_and_dropped_keep_the_newest(env: WebShopEnv) -> None:
    app = create_app(env.catalog, shared_index(env.catalog), goal_range=range(len(env.task_ids)), nouns=env.nouns)
    client, state = app.test_client(), app.extensions["webshop"]
    sids = [client.get(f"/start/{i % len(env.task_ids)}").headers["Location"].rsplit("/", 1)[-1] for i in range(2_500)]
    assert len(state.sessions) == len(state.nonces) == MAX_SESSIONS
    assert client.get(f"/s/{sids[0]}").status_code == 404 and client.get(f"/s/{sids[-1]}").status_code == 200
    client.get(f"/s/{sids[-MAX_SESSIONS]}")  # a visit makes it the most recent: the next session drops another
    client.get("/start/0")
    assert client.get(f"/s/{sids[-MAX_SESSIONS]}").status_code == 200
    assert client.get(f"/s/{sids[-MAX_SESSIONS + 1]}").status_code == 404


def _sessions() -> set[int]:
    gc.collect()
    return {id(o) for o in gc.get_objects() if type(o) is ShopSession}  # type(): no attribute lookup on foreign objects


def test_thousands_of_episodes_leave_one_session(env: WebShopEnv) -> None:
    before = _sessions()  # whatever other tests of this process still hold
    for i in range(2_000):
        env.reset(options={"task_index": i % len(env.task_ids)})
        env.step(f"<action>search[{env.goal(i % len(env.task_ids)).query}]</action>")
    assert len(_sessions() - before) <= 1  # the env's current session (it may reuse a freed one's id): none piled up
