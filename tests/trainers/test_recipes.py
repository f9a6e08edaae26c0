"""recipes/*.sh: every flag they pass exists and builds a valid TrainConfig (the paper's numbers)."""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("torch")
from trainers.config import add_arguments, from_args  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def recipe_config(script: str, env: dict[str, str]):
    """The `sapo-gym train` flags of a recipe, shell variables substituted, parsed like the CLI does."""
    text = (ROOT / "recipes" / script).read_text()
    block = text[text.index("cli train") + len("cli train"):].split('"$@"')[0].replace("\\\n", " ")
    block = re.sub(r"\$\{(\w+):-[^}]*\}", lambda m: env[m.group(1)], block)
    block = re.sub(r"\$(\w+)", lambda m: env[m.group(1)], block)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return from_args(parser.parse_args(shlex.split(block)))


@pytest.mark.parametrize("algo,tasks,group", [("sapo", 128, 1), ("ppo", 128, 1), ("grpo", 16, 8)])
def test_paper_recipe(algo, tasks, group):
    env = {"ALGO": algo, "ENV_ID": "sapo/ALFWorld-v0", "MODEL_DIR": "m", "DEVICE": "cuda", "OUT_DIR": "o",
           "SEED": "0", "PROMPT_TOKENS": "2048", "MICRO": "16"}
    cfg = recipe_config("paper.sh", env)
    assert (cfg.algo, cfg.num_tasks, cfg.rollouts_per_task) == (algo, tasks, group)  # equal episodes per iteration
    assert (cfg.lr, cfg.kl_coef, cfg.iterations, cfg.history_length, cfg.max_response_tokens) == (1e-6, 0.01, 150, 2, 512)
    assert (cfg.temperature, cfg.eval_temperature, cfg.c_inv, cfg.clip_eps) == (1.0, 0.4, 0.1, 0.2)


def test_smollm2_recipe():
    env = {"ALGO": "sapo", "ENV_ID": "sapo/Vault-v0", "DEVICE": "cuda", "OUT_DIR": "o", "SEED": "0"}
    cfg = recipe_config("smollm2_one_gpu.sh", env)
    assert (cfg.model, cfg.sft_episodes, cfg.lr) == ("smollm2", 64, 1e-6)


def test_paper_recipe_refuses_to_download(tmp_path):
    proc = subprocess.run(["bash", str(ROOT / "recipes/paper.sh"), "1.5b", "alfworld", "sapo"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "never downloaded" in proc.stderr
