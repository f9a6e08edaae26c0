"""The leaderboard is env-generic: boards, admission and replay on the real backends when they are available."""

from __future__ import annotations

import copy
import json

import pytest

from leaderboard.boards import BoardRegistry, default_board_keys
from leaderboard.checks import admit
from leaderboard.replay import replay_bundle
from leaderboard.seed import baseline_bundle
from sapo_gym.bundle import AgentInfo, build_bundle, parse_bundle


def test_every_registered_env_has_a_board_key() -> None:
    import sapo_gym

    keys = default_board_keys()
    assert {k.rpartition(":")[0] for k in keys} >= set(sapo_gym.ENVS) - {"sapo/WebShop-Browser-v0"}
    assert "sapo/Vault-v0:test" in keys


def _board(key: str):  # type: ignore[no-untyped-def]
    registry = BoardRegistry([key])
    boards = list(registry)
    if not boards:
        pytest.skip(f"board {key} unavailable here: {registry.skipped.get(key)}")
    return registry, boards[0]


@pytest.mark.slow
def test_webshop_full_split_is_admitted_and_replays(tmp_path) -> None:  # type: ignore[no-untyped-def]
    registry, board = _board("sapo/WebShop-v0:test")
    bundle = baseline_bundle(board, "expert")
    assert admit(bundle, registry) is board
    assert replay_bundle(bundle).verified
    forged = copy.deepcopy(bundle)
    ep = forged["episodes"][7]
    ep["turns"][-1]["observation"] = ep["turns"][-1]["observation"] + " (edited)"
    result = replay_bundle(forged)
    assert not result.verified and "episode 7" in result.message and "observation" in result.message


@pytest.mark.slow
def test_alfworld_episodes_replay() -> None:
    """Expert episodes on two tasks of the out-of-distribution split replay exactly; an edited output does not."""
    from agents.registry import load_agent
    from sapo_gym.evaluation import evaluate

    _, board = _board("sapo/ALFWorld-v0:eval_out_of_distribution")
    records = evaluate(
        load_agent("expert"), board.env_id, split=board.split, task_ids=board.task_ids[:2], batch_size=2, progress=False
    )
    bundle = parse_bundle(
        json.dumps(build_bundle(records, board.spec_fields, board.spec_hash, AgentInfo(name="expert"), [0]))
    )
    result = replay_bundle(bundle)
    assert result.verified, result.message
    bundle["episodes"][1]["turns"][0]["output"] = "<think>x</think><action>inventory</action>"
    result = replay_bundle(bundle)
    assert not result.verified and result.message.startswith("episode 1 ")


def test_search_baseline_is_seeded_on_alfworld_boards_only(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The whole held-out split through the API's checks; Vault boards get no search entry."""
    from leaderboard.seed import BASELINE_ENVS, seed_store

    registry, board = _board("sapo/ALFWorld-v0:eval_out_of_distribution")
    bundle = baseline_bundle(board, "search")
    assert admit(bundle, registry) is board
    assert bundle["aggregates"]["all"]["success"] > 0.9 and bundle["agent"]["name"] == "search (observation-only)"

    class Store:  # records what seeding adds (the store's own tests cover storage)
        def __init__(self) -> None:
            self.added: list[tuple[str, str]] = []

        def add(self, bundle, board, submitter, token_id):  # type: ignore[no-untyped-def]
            self.added.append((board.key, bundle["agent"]["name"]))
            return type("Row", (), {"id": len(self.added)})()

    store = Store()
    seed_store(store, BoardRegistry(["sapo/Vault-v0:test"]), specs=("random", "search"))
    assert store.added == [("sapo/Vault-v0:test", "random (admissible)")]
    assert BASELINE_ENVS["search"] == {"sapo/ALFWorld-v0", "sapo/ALFWorld-Mini-v0"}
