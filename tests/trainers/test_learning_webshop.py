"""Each method lifts success on a handful of WebShop-family goals from a weak warm start (slow).

The WebShop counterpart of ``test_learning.py``. The goals are the last six of ``sapo/WebShop-Mini-v0``'s
400, taken by moving the cut: ``test_goals=394`` leaves goals 394–399 as ``train``. The shop, pages,
reward, parser and horizon are WebShop's. The warm start clones the oracle on 48 episodes of *other* goals
(``split=test`` under the same cut) for 10 epochs. The oracle searches with the goal product's query,
walks to the product, clicks the goal's options and buys. The clone learns the format and the moves,
writes its own queries, and wins few of the six goals.

RL then trains on the six goals for ``BUDGET[algo]`` iterations of 8 episodes (GRPO: 2 goals × 4
rollouts), with ``--preset webshop-cpu``'s settings: the random-init tiny Qwen2 at hidden 128, the plain
prompt with one turn of history, 40 response tokens, admissible-action constrained decoding (the query
free), lr 3e-4, KL 0.01.

Success is measured before and after on the six goals × 16 seeds = 96 episodes at the evaluation
temperature (0.4), with the same sampling seed both times. The test asks for a rise that 96 + 96
episodes can tell from noise: the one-sided two-proportion z-statistic of ``test_learning.py``
above 1.645 (p < 0.05).
"""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("torch")

from tests.support.learning import rise  # noqa: E402
from trainers.config import TrainConfig  # noqa: E402
from trainers.loop import Trainer  # noqa: E402
from trainers.sft import warm_start  # noqa: E402

pytestmark = pytest.mark.slow

BUDGET = {"sapo": 40, "ppo": 40, "grpo": 40}
"""RL iterations per method (8 episodes each)."""
CUT = ["test_goals=394"]
"""Goals 394–399 of WebShop-Mini's 400 are this test's ``train`` goals; 0–393 its ``test`` goals (the warm start's)."""


@pytest.mark.parametrize("algo", ["sapo", "ppo", "grpo"])
def test_rl_lifts_success_on_webshop_goals(algo, tmp_path):
    cfg = TrainConfig(algo=algo, env="sapo/WebShop-Mini-v0", env_arg=CUT, tiny_hidden_size=128, prompt="plain",
                      history_length=1, max_prompt_tokens=1024, max_response_tokens=40, constrain="admissible",
                      old_log_probs="rollout", episodes_per_iteration=8, group_size=4 if algo == "grpo" else 1,
                      iterations=BUDGET[algo], lr=3e-4, critic_lr=1e-3, micro_batch_size=16, sft_episodes=48,
                      sft_epochs=10, sft_lr=3e-3, out_dir=str(tmp_path / "run"), checkpoint_every=0, progress=False)
    trainer = Trainer(cfg)
    demos = dataclasses.replace(cfg, env_arg=[*CUT, "split=test"])
    warm_start(trainer.policy, demos, demos.gym_make_kwargs())
    before, after, z, history = rise(trainer, BUDGET[algo])
    print(f"{algo}: success {before:.3f} -> {after:.3f} (z = {z:.2f}); rollouts {history}")
    assert before <= 0.3, f"the warm start should leave room on these goals, got {before:.3f}"
    assert z > 1.645, f"{algo}: success {before:.3f} -> {after:.3f} in {BUDGET[algo]} iterations (z = {z:.2f}): {history}"
