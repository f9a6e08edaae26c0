"""Seed a leaderboard with the built-in baselines on every hosted board: the expert (ceiling), the
random-admissible agent (floor) and, on ALFWorld boards, the observation-only search policy."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from leaderboard.boards import Board, BoardRegistry
from leaderboard.checks import admit
from sapo_gym.bundle import AgentInfo, build_bundle, parse_bundle

__all__ = ["BASELINES", "BASELINE_ENVS", "baseline_bundle", "seed_store"]

BASELINES: dict[str, AgentInfo] = {
    "expert": AgentInfo(
        name="expert (oracle)",
        algorithm="privileged oracle",
        training_budget="none",
        description="Follows the env's privileged oracle (info['expert_action']): the ceiling.",
        spec="expert",
    ),
    "random": AgentInfo(
        name="random (admissible)",
        algorithm="uniform random",
        training_budget="none",
        description="Uniformly random admissible action each turn: the floor.",
        spec="random",
    ),
    "search": AgentInfo(
        name="search (observation-only)",
        algorithm="hand-coded search",
        training_budget="none",
        description="Sweeps the receptacles, takes the goal object where it sees it, "
        "then does the task; reads only observations, admissible commands and the goal (sapo_gym/alfworld/search.py).",
        spec="search",
    ),
}
BASELINE_ENVS: dict[str, frozenset[str]] = {"search": frozenset({"sapo/ALFWorld-v0", "sapo/ALFWorld-Mini-v0"})}
"""Baselines that play only some envs (the others play every env); seeding skips the rest."""


def baseline_bundle(board: Board, spec: str, seeds: Iterable[int] = (0,), progress: bool = False) -> dict[str, Any]:
    """Evaluate a built-in baseline on a board's split and return its bundle (JSON round-tripped)."""
    from agents.registry import load_agent
    from sapo_gym.evaluation import evaluate

    seeds = list(seeds)
    agent = load_agent(spec, seed=seeds[0])
    records = evaluate(agent, board.env_id, split=board.split, seeds=seeds, progress=progress)
    bundle = build_bundle(
        records,
        board.spec_fields,
        board.spec_hash,
        BASELINES[spec],
        seeds,
        command=f"sapo-gym leaderboard seed ({spec})",
    )
    return parse_bundle(json.dumps(bundle, allow_nan=False))


def seed_store(
    store: Any, boards: BoardRegistry, specs: Iterable[str] = ("expert", "random", "search"), progress: bool = False
) -> list[int]:
    """Add one submission per (board, baseline that plays its env) through the same checks as the API; their ids."""
    ids = []
    for board in boards:
        for spec in specs:
            if spec in BASELINE_ENVS and board.env_id not in BASELINE_ENVS[spec]:
                continue
            bundle = baseline_bundle(board, spec, progress=progress)
            admit(bundle, boards)
            ids.append(store.add(bundle, board, submitter="sapo-gym baselines", token_id=None).id)
    return ids
