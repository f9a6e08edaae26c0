"""verl-agent's validation protocol on the official games: eval_in_distribution, 128 workers, seeds seed+1000+i."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from sapo_gym.alfworld.catalog import resolve
from sapo_gym.evaluation import evaluate
from sapo_gym.records import VERL_AGENT


@pytest.mark.needs_data
def test_verl_agent_validation_draw_on_valid_seen_is_textworlds(alfworld_data: Path):
    textworld_batch = pytest.importorskip("textworld.gym.envs.textworld_batch")
    games = resolve("eval_in_distribution", data_dir=alfworld_data).games
    ids = [g.task_id for g in games]
    files = [str(g.game_file) for g in games]  # sorted like the ids: the paths share the root before them
    assert sorted(files) == files and len(ids) == 140
    drawn = VERL_AGENT.task_ids(ids, 0)
    for worker in (0, 1, 64, 127):  # AlfworldWorker: one batch env of one game, env.seed(seed + 1000 + worker)
        env = textworld_batch.TextworldBatchGymEnv(list(files), batch_size=1)
        env.seed(1000 + worker)
        assert ids[files.index(next(env._gamefiles_iterator))] == drawn[worker]
        env.close()
    repeats = Counter(drawn)
    # drawn with repeats: 128 episodes over 91 distinct games of the 140, none more than 3 times (sorted ids, seed 0)
    assert len(drawn) == 128 and len(repeats) == 91 and max(repeats.values()) == 3
    assert VERL_AGENT.task_ids(ids, 1)[:127] == drawn[1:]  # seeds s and s+1 share 127 of their 128 worker seeds


@pytest.mark.needs_data
def test_expert_through_the_verl_agent_mode(alfworld_data: Path):
    from agents import ExpertAgent

    records = evaluate(
        ExpertAgent(),
        "sapo/ALFWorld-v0",
        split="eval_in_distribution",
        progress=False,
        env_kwargs={"data_dir": str(alfworld_data), "prompt": None},
        mode=VERL_AGENT,
    )
    ids = [g.task_id for g in resolve("eval_in_distribution", data_dir=alfworld_data).games]
    assert [r.task_id for r in records] == VERL_AGENT.task_ids(ids, 0)
    assert all(r.success and r.seed == 0 for r in records)


def test_an_agent_with_per_task_memory_plays_the_repeats_of_a_draw():
    # SearchAgent refuses a batch holding one task twice; the harness never forms one (the draw's order is kept)
    from agents.baselines import SearchAgent

    env_id = "sapo/ALFWorld-Mini-v0"
    records = evaluate(
        SearchAgent(), env_id, split="eval_out_of_distribution", batch_size=8, progress=False, mode=VERL_AGENT
    )
    ids = [g.task_id for g in resolve("eval_out_of_distribution", data_dir="embedded-mini").games]
    drawn = VERL_AGENT.task_ids(ids, 0)
    assert len(set(drawn)) < len(drawn) == 128 and [r.task_id for r in records] == drawn
    assert all(r.success for r in records)  # search wins all 60 held-out Mini games (docs/alfworld.md)
