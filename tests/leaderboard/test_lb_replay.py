"""Replay verification: honest bundles reproduce exactly; any tampering with outcomes is caught."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from leaderboard.replay import replay_bundle
from sapo_gym.bundle import check_bundle
from tests.support.leaderboard import refresh


@pytest.mark.parametrize("which", ["expert", "random"])
def test_honest_bundles_verify(which: str, expert_bundle, random_bundle) -> None:  # type: ignore[no-untyped-def]
    bundle = expert_bundle if which == "expert" else random_bundle
    result = replay_bundle(bundle)
    assert result.verified, result.message
    assert result.episodes == len(bundle["episodes"])


def _first_long(bundle: dict[str, Any]) -> dict[str, Any]:
    return next(ep for ep in bundle["episodes"] if ep["steps"] >= 2)


def _claim_win(b: dict[str, Any]) -> None:
    ep = next(e for e in b["episodes"] if not e["success"])
    ep["success"], ep["score"] = True, 1.0


def _swap_output(b: dict[str, Any]) -> None:
    # the agent "wrote" a different button than the one its recorded action and outcome show
    ep = b["episodes"][0]
    turn = ep["turns"][0]
    other = next(c for c in ("red", "blue", "green") if c not in turn["action"])
    turn["output"] = f"<think>x</think><action>press {other}</action>"


def _drop_last_turn(b: dict[str, Any]) -> None:
    ep = _first_long(b)
    dropped = ep["turns"].pop()
    ep["steps"] -= 1
    ep["return"] -= dropped["reward"]
    ep["invalid_actions"] = sum(not t["valid"] for t in ep["turns"])


def _extra_turn(b: dict[str, Any]) -> None:
    ep = b["episodes"][0]
    ep["turns"].append(dict(ep["turns"][-1], reward=0.0))
    ep["steps"] += 1


TAMPERING: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "claimed win": (_claim_win, "success is False"),
    "edited observation": (
        lambda b: b["episodes"][3]["turns"][0].__setitem__("observation", "The vault opens."),
        "observation",
    ),
    "edited initial observation": (
        lambda b: b["episodes"][1].__setitem__("initial_observation", "hello"),
        "initial observation",
    ),
    "edited action": (lambda b: b["episodes"][2]["turns"][0].__setitem__("action", "press purple"), "action is"),
    "edited think": (lambda b: b["episodes"][2]["turns"][0].__setitem__("think", "I cheat"), "think is"),
    "output that does not give the recorded outcome": (_swap_output, "step 1"),
    "edited reward": (
        lambda b: [
            b["episodes"][0]["turns"][-1].__setitem__("reward", 11.0),
            b["episodes"][0].__setitem__("return", 11.0),
        ],
        "reward",
    ),
    "wrong task type": (lambda b: b["episodes"][0].__setitem__("task_type", "code9"), "task_type"),
    "episode cut short": (_drop_last_turn, "not over"),
    "turn after the end": (_extra_turn, "ended after"),
}


@pytest.mark.parametrize("name", list(TAMPERING))
def test_tampering_fails_verification(name: str, expert_bundle, random_bundle) -> None:  # type: ignore[no-untyped-def]
    tamper, message = TAMPERING[name]
    bundle = (
        expert_bundle
        if name in ("episode cut short", "output that does not give the recorded outcome")
        else random_bundle
    )
    tamper(bundle)
    check_bundle(refresh(bundle))  # self-consistent: only replay can tell
    result = replay_bundle(bundle)
    assert not result.verified
    assert message in result.message, result.message
