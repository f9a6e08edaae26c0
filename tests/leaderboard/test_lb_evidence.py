"""Intervals count independent evidence (tasks), not repeated seeds; the per-seed spread is reported apart."""

from __future__ import annotations

import copy

import pytest

from leaderboard.checks import admit
from sapo_gym.intervals import Z95
from tests.support.leaderboard import body, refresh


def _copied_to_seeds(bundle, seeds):  # type: ignore[no-untyped-def]
    """The attack: a seed-independent env's episodes copied to more seeds."""
    out = copy.deepcopy(bundle)
    out["evaluation"]["seeds"] = list(seeds)
    out["episodes"] = [{**copy.deepcopy(ep), "seed": s} for s in seeds for ep in bundle["episodes"]]
    return refresh(out)


def test_repeated_seeds_of_a_deterministic_agent_add_no_evidence(expert_bundle, boards) -> None:  # type: ignore[no-untyped-def]
    one = expert_bundle["aggregates"]["all"]
    many = _copied_to_seeds(expert_bundle, range(64))
    admit(many, boards)  # a well-formed bundle: accepted, but it proves no more than the 16 episodes did
    agg = many["aggregates"]["all"]
    assert agg["success_ci_low"] < 0.81  # not the [0.996, 1.0] of 1024 "independent" episodes
    assert (
        agg["success_ci_low"] == pytest.approx(one["success_ci_low"]) == pytest.approx(16 / (16 + Z95**2))
    )  # Wilson at p = 1
    assert agg["episodes"] == 1024 and agg["tasks"] == 16 and agg["seeds"] == 64
    assert (agg["success_seed_min"], agg["success_seed_max"]) == (1.0, 1.0)
    for category, row in many["aggregates"].items():
        assert row["score_ci_low"] == pytest.approx(expert_bundle["aggregates"][category]["score_ci_low"]), category


def test_the_api_and_the_board_report_task_counted_intervals_and_the_seed_spread(client, auth, random_bundle) -> None:  # type: ignore[no-untyped-def]
    many = _copied_to_seeds(random_bundle, range(8))
    many["episodes"][0]["success"] = not many["episodes"][0]["success"]  # would fail replay; admission does not replay
    r = client.post("/api/v1/submissions", data=body(refresh(many)), headers=auth)
    assert r.status_code == 201, r.json
    agg = client.get(f"/api/v1/submissions/{r.json['id']}").json["aggregates"]["all"]
    assert agg["tasks"] == 16 and agg["seeds"] == 8 and agg["success_seed_min"] < agg["success_seed_max"]
    page = client.get(f"/board/{many['env']['spec_hash']}").text
    assert "8 seeds" in page and "per-seed success" in page
