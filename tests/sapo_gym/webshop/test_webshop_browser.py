"""Browser mode (flask + selenium + headless Chromium) against text mode: same content, same reward."""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest

import sapo_gym  # noqa: F401  (registers the ids)
from agents.base import format_action
from sapo_gym.webshop.browser import CHROMEDRIVER, CHROMIUM, WebShopBrowserEnv
from sapo_gym.webshop.env import WebShopEnv

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)),
        reason="needs Debian's chromium and chromium-driver",
    ),
]

_KEYS = (
    "won",
    "score",
    "admissible_actions",
    "simple_observation",
    "is_action_admissible",
    "expert_action",
    "reward_breakdown",
)


@pytest.fixture(scope="module")
def envs():
    browser, text = gym.make("sapo/WebShop-Browser-v0", split="test", prompt=None).unwrapped, WebShopEnv(split="test")
    assert isinstance(browser, WebShopBrowserEnv)
    yield browser, text
    browser.close()


def _same(a: tuple, b: tuple) -> None:
    (obs_a, r_a, term_a, _, info_a), (obs_b, r_b, term_b, _, info_b) = a, b
    assert obs_a == obs_b
    assert (r_a, term_a) == (r_b, term_b)
    for key in _KEYS:
        assert info_a.get(key) == info_b.get(key), key


def _step_both(envs, action: str) -> tuple:
    browser, text = envs
    out_b, out_t = browser.step(format_action(action, "t")), text.step(format_action(action, "t"))
    _same(out_b, out_t)
    return out_t


def test_oracle_episode_matches_text_mode(envs) -> None:
    browser, text = envs
    for task in (0, 3):
        (ob, ib), (ot, it) = browser.reset(options={"task_index": task}), text.reset(options={"task_index": task})
        assert ob == ot and ib["admissible_actions"] == it["admissible_actions"]
        for _ in range(15):
            obs, reward, terminated, _, info = _step_both(envs, it["expert_action"])
            it = info
            if terminated:
                break
        assert terminated and info["score"] == 1.0 and reward == 10.0


def test_wandering_episode_matches_text_mode(envs) -> None:
    """Paging, sub-pages, options, inadmissible actions and a non-winning purchase."""
    browser, text = envs
    browser.reset(options={"task_index": 7})
    _, info = text.reset(options={"task_index": 7})
    rng = np.random.default_rng(0)
    script = ["click[buy now]", f"search[{text.session.goal.query}]", "click[next >]", "click[< prev]"]
    for action in script:
        _, _, _, _, info = _step_both(envs, action)
    product = text.session.results[1].lower()
    for action in [
        f"click[{product}]",
        "click[features]",
        "click[< prev]",
        "click[description]",
        "click[back to search]",
        "search[no such thing qqq]",
        "click[back to search]",
        f"search[{text.session.goal.query}]",
        f"click[{product}]",
        "click[reviews]",
        "click[< prev]",
    ]:
        _, _, _, _, info = _step_both(envs, action)
    options = [
        a
        for a in info["admissible_actions"]
        if a
        not in {
            "click[back to search]",
            "click[< prev]",
            "click[description]",
            "click[features]",
            "click[reviews]",
            "click[buy now]",
        }
    ]
    for action in list(rng.permutation(options))[:2] + ["click[buy now]"]:
        obs, reward, terminated, _, info = _step_both(envs, str(action))
    assert terminated and 0.0 <= info["score"] <= 1.0


def test_searches_off_the_search_page_and_in_any_script_match_text_mode(envs) -> None:
    """WebShop's text env runs a search from any page; the browser submits the same form there."""
    browser, text = envs
    browser.reset(options={"task_index": 2})
    text.reset(options={"task_index": 2})
    for action in ["search[women’s “soft” sweater]", "search[coffee table]", "click[next >]", "search[靴 lamp]"]:
        _step_both(envs, action)
    assert text.session.kind == "results" and text.session.results  # the later searches ran from results pages
    for action in [
        f"click[{text.session.results[0].lower()}]",
        "click[description]",
        "search[tea]",
        "search[   ]",
        "search[red\nshoes]",
    ]:
        _, _, _, _, info = _step_both(envs, action)
    assert not info["is_action_admissible"]  # the line break
    assert text.session.kind == "results" and text.session.keywords == "   " and text.session.searched[-2] == "tea"


def test_check_env_browser(envs) -> None:
    from gymnasium.utils.env_checker import check_env

    check_env(envs[0], skip_render_check=True)
