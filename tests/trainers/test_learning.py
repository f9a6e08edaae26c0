"""Each method lifts success on a handful of ALFWorld-family games from a weak warm start (slow).

The games: six generated ALFWorld-Mini train games (the compiled engine, ALFWorld's PDDL domain and
text grammar) of the heat, clean and cool categories, the ones the CPU default's tiny model learns
most on (docs/compare.md), at a horizon of 25 instead of 50 to bound the test's time. The warm start
clones the walkthrough expert on 24 *other* train games for 10 epochs, which teaches the format and
the moves but leaves these six games at 12–15 %. RL then trains on the six games for
``BUDGET[algo]`` iterations of 8 episodes (GRPO: 2 games × 4 rollouts), with the CPU default's settings:
the random-init tiny Qwen2 at hidden 128, the plain prompt, 24 response tokens, admissible-action
constrained decoding, lr 3e-4, KL 0.01.

Success is measured before and after on the six games × 16 seeds = 96 episodes at the evaluation
temperature (0.4), with the same sampling seed both times. The test asks for a rise that 96 + 96
episodes can tell from noise: a one-sided two-proportion z-statistic above 1.645 (p < 0.05).
Measured over training seeds (a stand-in for the sampled tokens another CPU's kernels would change):
at 48 + 48 episodes, seeds 0–2, rises of 21–38 points and z from 2.36 to 3.96; at 96 + 96 on seed 1,
the weakest, z = 2.81 (PPO), 3.39 (SAPO). GRPO under verl-agent's penalty placement (the penalty off each
turn's score before statistics over every turn row) learns slower here: at 40 iterations, seeds 0–2,
z = 1.97, 3.39, 2.85 (0.33 above the threshold on seed 0, the test's); at 60, z = 4.98, 8.25, 3.15, so
GRPO gets 60. The threshold leaves the weakest (PPO at 40, GRPO at 60) a margin of 1.2 to 1.5 in z,
about 6 of 96 episodes.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from tests.support.learning import rise, z_rise  # noqa: E402
from trainers.config import TrainConfig  # noqa: E402
from trainers.loop import Trainer  # noqa: E402
from trainers.sft import warm_start  # noqa: E402

pytestmark = pytest.mark.slow

BUDGET = {"sapo": 40, "ppo": 40, "grpo": 60}
"""RL iterations per method (8 episodes each); GRPO's larger budget is measured above."""
CATEGORIES = ("heat", "clean", "cool")


def _write_sets(folder: Path) -> tuple[Path, Path]:
    """Two generated-set files: the warm start's 24 train games, and the 6 RL games after them."""
    from sapo_gym.alfworld.catalog import EMBEDDED_MINI_SET

    with gzip.open(EMBEDDED_MINI_SET, "rt") as fh:
        header, *lines = fh.read().splitlines()
    train = [line for line in lines if json.loads(line)["split"] == "train"]
    rl = [line for line in train[24:] if json.loads(line)["task_type"].split("_")[1] in CATEGORIES][:6]
    paths = (folder / "warm_start_games.jsonl.gz", folder / "rl_games.jsonl.gz")
    for path, games in zip(paths, (train[:24], rl)):
        with gzip.open(path, "wt") as fh:
            fh.write("\n".join([header, *games]) + "\n")
    return paths


def test_z_statistic_by_hand():
    # 6/48 -> 24/48: pooled 0.3125, se = sqrt(0.3125 * 0.6875 * 2 / 48) = 0.094614, z = 0.375 / 0.094614 = 3.96347;
    # the hand value is rounded to 4 decimals (error <= 5e-5), hence abs=1e-4
    assert z_rise(6 / 48, 24 / 48, 48) == pytest.approx(3.9635, abs=1e-4)
    assert z_rise(0.5, 0.5, 48) == 0.0


@pytest.mark.parametrize("algo", ["sapo", "ppo", "grpo"])
def test_rl_lifts_success_on_alfworld_games(algo, tmp_path):
    warm_games, rl_games = _write_sets(tmp_path)
    cfg = TrainConfig(algo=algo, env="sapo/ALFWorld-Mini-v0", env_arg=[f"data_dir={rl_games}", "max_episode_steps=25"],
                      tiny_hidden_size=128, prompt="plain", history_length=0, max_prompt_tokens=1024,
                      max_response_tokens=24, constrain="admissible", old_log_probs="rollout", episodes_per_iteration=8,
                      group_size=4 if algo == "grpo" else 1, iterations=BUDGET[algo], lr=3e-4, critic_lr=1e-3,
                      micro_batch_size=16, sft_episodes=24, sft_epochs=10, sft_lr=3e-3, out_dir=str(tmp_path / "run"),
                      checkpoint_every=0, progress=False)
    trainer = Trainer(cfg)
    demos = dataclasses.replace(cfg, env_arg=[f"data_dir={warm_games}", "max_episode_steps=25"])
    warm_start(trainer.policy, demos, demos.gym_make_kwargs())
    before, after, z, history = rise(trainer, BUDGET[algo])
    print(f"{algo}: success {before:.3f} -> {after:.3f} (z = {z:.2f}); rollouts {history}")
    assert before <= 0.3, f"the warm start should leave room on these games, got {before:.3f}"
    assert z > 1.645, f"{algo}: success {before:.3f} -> {after:.3f} in {BUDGET[algo]} iterations (z = {z:.2f}): {history}"
