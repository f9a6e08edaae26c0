"""Seed a leaderboard with the expert (ceiling) and random (floor) baselines on every hosted board."""

from __future__ import annotations

import json
from typing import Any, Iterable

from leaderboard.boards import Board, BoardRegistry
from leaderboard.bundle import AgentInfo, build_bundle, parse_bundle
from leaderboard.checks import admit

__all__ = ["BASELINES", "baseline_bundle", "seed_store"]

BASELINES: dict[str, AgentInfo] = {
    "expert": AgentInfo(name="expert (oracle)", algorithm="privileged oracle",
                        training_budget="none", description="Follows the env's privileged oracle (info['expert_action']): the ceiling.",
                        spec="expert"),
    "random": AgentInfo(name="random (admissible)", algorithm="uniform random",
                        training_budget="none", description="Uniformly random admissible action each turn: the floor.",
                        spec="random"),
}


def baseline_bundle(board: Board, spec: str, seeds: Iterable[int] = (0,), progress: bool = False) -> dict[str, Any]:
    """Evaluate a built-in baseline on a board's split and return its bundle (JSON round-tripped)."""
    from agents.registry import load_agent
    from sapo_gym.evaluation import evaluate

    seeds = list(seeds)
    agent = load_agent(spec, seed=seeds[0])
    records = evaluate(agent, board.env_id, split=board.split, seeds=seeds, progress=progress)
    bundle = build_bundle(records, board.spec_fields, board.spec_hash, BASELINES[spec], seeds, command=f"sapo-gym leaderboard seed ({spec})")
    return parse_bundle(json.dumps(bundle, allow_nan=False))


def seed_store(store: Any, boards: BoardRegistry, specs: Iterable[str] = ("expert", "random"), progress: bool = False) -> list[int]:
    """Add one submission per (board, baseline) through the same checks as the API; their ids."""
    ids = []
    for board in boards:
        for spec in specs:
            bundle = baseline_bundle(board, spec, progress=progress)
            admit(bundle, boards)
            ids.append(store.add(bundle, board, submitter="sapo-gym baselines", token_id=None).id)
    return ids
