"""The text env: contract, determinism, bad input, oracle and random baselines."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings, strategies as st

import sapo_gym  # noqa: F401  (registers the ids)
from agents.base import format_action
from sapo_gym.webshop.env import WebShopEnv


@pytest.fixture(scope="module")
def env() -> WebShopEnv:
    return WebShopEnv(split="test")


def _act(env: WebShopEnv, action: str):
    return env.step(format_action(action, "t"))


def test_check_env_on_registered_ids() -> None:
    for prompt in ("default", None):
        e = gym.make("sapo/WebShop-v0", prompt=prompt)
        check_env(e.unwrapped, skip_render_check=True)
        e.close()


def test_first_page_and_actions(env: WebShopEnv) -> None:
    obs, info = env.reset(options={"task_index": 0})
    assert obs == "'Search'" and info["admissible_actions"] == ["search[<your query>]"]
    assert info["simple_observation"] == f"WebShop [SEP] Instruction: [SEP] {info['task']} [SEP] Search"
    assert info["task_type"] in {"beauty", "electronics", "fashion", "food", "furniture"}
    obs, reward, terminated, truncated, info = _act(env, "search[red shoes]")
    assert info["is_action_admissible"] and not terminated and reward == 0.0
    assert obs.startswith("'Back to Search' [SEP] 'Page 1 (Total results: ")
    assert info["admissible_actions"][:1] == ["click[back to search]"]
    assert all(a.startswith("click[") for a in info["admissible_actions"])


def test_seeded_reset_is_deterministic() -> None:
    a, b = WebShopEnv(split="train"), WebShopEnv(split="train")
    for seed in (0, 1, 7):
        assert a.reset(seed=seed)[1]["task_id"] == b.reset(seed=seed)[1]["task_id"]
    ids = {a.reset(seed=s)[1]["task_id"] for s in range(20)}
    assert len(ids) > 10


def _state(env: WebShopEnv) -> tuple:
    s = env.session
    return s.kind, s.keywords, s.page_no, s.asin, dict(s.options), s.render().agent_observation()


@pytest.mark.parametrize(
    "action",
    [
        "click[buy now]",  # not on this page
        "click[not a button]",
        "search[]",
        "search[" + "x" * 100_000 + "]",
        "search[red\nshoes]",  # WebShop's action pattern does not match across a line break
        "jump[to]",
        "",
    ],
)
def test_bad_input_changes_nothing(env: WebShopEnv, action: str) -> None:
    env.reset(options={"task_index": 1})
    if not action.startswith("search"):  # clicks are tried on a results page, searches on the search page
        _act(env, "search[coffee table]")
    before = _state(env)
    obs, reward, terminated, truncated, info = env.step(format_action(action, "t") if action else "")
    assert not info["is_action_admissible"] and reward == 0.0 and not terminated
    assert _state(env) == before and obs == before[-1]


@pytest.mark.parametrize("query", ["chaussures bleues é", "靴", "women’s “soft” sweater", "   "])
def test_any_script_and_blank_queries_are_searched(env: WebShopEnv, query: str) -> None:
    env.reset(options={"task_index": 1})
    _, _, _, _, info = _act(env, f"search[{query}]")
    assert info["is_action_admissible"] and env.session.kind == "results" and env.session.keywords == query.lower()
    assert env.session.results == env.session.index.search(query.lower())


def test_search_runs_from_any_page_but_the_done_page(env: WebShopEnv) -> None:
    env.reset(options={"task_index": 2})
    _act(env, "search[coffee table]")
    _, _, _, _, info = _act(env, "search[tea]")  # from the results page (no search box: not listed, but run)
    assert info["is_action_admissible"] and env.session.keywords == "tea"
    assert not any(a.startswith("search[") for a in info["admissible_actions"])
    _act(env, f"click[{env.session.results[0].lower()}]")
    _act(env, "click[description]")
    _, _, _, _, info = _act(env, "search[lamp]")  # from a sub-page
    assert info["is_action_admissible"] and (env.session.kind, env.session.keywords, env.session.page_no) == (
        "results",
        "lamp",
        1,
    )
    _act(env, f"click[{env.session.results[0].lower()}]")
    _act(env, "click[buy now]")
    _, _, _, _, info = _act(env, "search[tea]")  # the episode is over
    assert not info["is_action_admissible"] and env.session.kind == "done"


def test_strict_protocol_does_not_execute_inadmissible_actions() -> None:
    e = WebShopEnv(split="test", protocol="strict-v1")
    e.reset(options={"task_index": 0})
    _, _, _, _, info = e.step(format_action("click[buy now]", "t"))
    assert not info["is_action_valid"] and info["parse_reason"] == "inadmissible"
    _, _, _, _, info = e.step(format_action("search[green tea]", "t"))
    assert info["is_action_valid"] and info["is_action_admissible"] and e.session.kind == "results"


def _run_oracle(env: WebShopEnv, index: int) -> dict:
    obs, info = env.reset(options={"task_index": index})
    total = 0.0
    for _ in range(15):
        obs, reward, terminated, truncated, info = env.step(format_action(info["expert_action"], "plan"))
        total += reward
        if terminated:
            break
    info["return"] = total
    return info


def test_oracle_scores_one_on_at_least_95_percent_of_test_goals(env: WebShopEnv) -> None:
    infos = [_run_oracle(env, i) for i in range(len(env.task_ids))]
    assert len(infos) == 500
    assert np.mean([i["score"] == 1.0 for i in infos]) >= 0.95
    assert all(i["return"] == (10.0 if i["won"] else 0.0) for i in infos)
    assert all(i["won"] == (i["score"] == 1.0) for i in infos)


def test_purchase_ends_the_episode_with_the_breakdown(env: WebShopEnv) -> None:
    env.reset(options={"task_index": 5})
    _act(env, "search[" + env.session.goal.query + "]")
    first = env.session.results[0]
    _act(env, f"click[{first.lower()}]")
    obs, reward, terminated, truncated, info = _act(env, "click[buy now]")
    assert terminated and 0.0 <= info["score"] <= 1.0
    assert info["reward_breakdown"]["total"] == info["score"]
    assert reward == (10.0 if info["score"] == 1.0 else 0.0) and info["won"] == (info["score"] == 1.0)
    assert "Your score (min 0.0, max 1.0)" in obs
    _, reward_after, _, _, info_after = _act(env, "click[buy now]")  # stepping past the end rewards nothing
    assert reward_after == 0.0 and not info_after["is_action_admissible"]


def test_random_agent_scores_low(env: WebShopEnv) -> None:
    rng = np.random.default_rng(0)
    scores = []
    for i in range(100):
        obs, info = env.reset(options={"task_index": i})
        for _ in range(15):
            actions = info["admissible_actions"]
            obs, r, terminated, truncated, info = env.step(format_action(actions[rng.integers(len(actions))], "r"))
            if terminated:
                break
        scores.append(info["score"])
    assert np.mean(scores) < 0.2


def test_invalid_split_names_the_choices() -> None:
    with pytest.raises(ValueError, match=r"valid choices: \['test', 'train', 'verl-agent-test', 'verl-agent-train'\]"):
        gym.make("sapo/WebShop-v0", split="valid")
    with pytest.raises(TypeError, match="valid choices"):
        gym.make("sapo/WebShop-v0", colour="red")


_actions = st.one_of(
    st.text(max_size=300),
    st.builds(
        lambda verb, arg: f"<think>x</think><action>{verb}[{arg}]</action>",
        st.sampled_from(["search", "click", "Click", "buy"]),
        st.text(max_size=80),
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=st.lists(_actions, min_size=1, max_size=6))
def test_any_output_never_raises(env: WebShopEnv, actions: list[str]) -> None:
    _, info = env.reset(options={"task_index": 3})
    for action in actions:
        before = _state(env)
        obs, reward, terminated, truncated, info = env.step(action)
        assert isinstance(obs, str) and reward in (0.0, 10.0) and 0.0 <= info["score"] <= 1.0
        if not info["is_action_admissible"]:
            assert reward == 0.0 and _state(env) == before


def test_the_oracle_matches_the_goal_options_once_an_episode(env: WebShopEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """The oracle's fuzzy match of the goal's options on the goal's product is a function of the goal: computed once
    an episode, however many steps the oracle spends on the product page."""
    from sapo_gym.webshop import shop

    calls: list[str] = []
    real = shop._best_option
    monkeypatch.setattr(shop, "_best_option", lambda options, wanted: calls.append(wanted) or real(options, wanted))
    for index in range(20):
        calls.clear()
        info = _run_oracle(env, index)
        goal = env.goal(index)
        assert len(calls) <= len(goal.goal_options), (index, calls)
        assert info["won"] == (info["score"] == 1.0)
