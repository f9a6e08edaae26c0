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
    block = text[text.index("cli train") + len("cli train") :].split('"$@"')[0].replace("\\\n", " ")
    block = re.sub(r"\$\{(\w+):-[^}]*\}", lambda m: env[m.group(1)], block)
    block = re.sub(r"\$(\w+)", lambda m: env[m.group(1)], block)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return from_args(parser.parse_args(shlex.split(block)))


@pytest.mark.parametrize(
    "algo,tasks,group", [("sapo", 128, 1), ("ppo", 128, 1), ("grpo", 16, 8), ("gigpo", 16, 8), ("rloo", 16, 8)]
)
def test_paper_recipe(algo, tasks, group):
    env = {
        "ALGO": algo,
        "ENV_ID": "sapo/ALFWorld-v0",
        "MODEL_DIR": "m",
        "DEVICE": "cuda",
        "OUT_DIR": "o",
        "SEED": "0",
        "PROMPT_TOKENS": "2048",
        "MICRO": "16",
    }
    cfg = recipe_config("paper.sh", env)
    assert (cfg.algo, cfg.num_tasks, cfg.rollouts_per_task) == (algo, tasks, group)  # equal episodes per iteration
    assert (cfg.lr, cfg.kl_coef, cfg.iterations, cfg.history_length, cfg.max_response_tokens) == (
        1e-6,
        0.01,
        150,
        2,
        512,
    )
    assert (cfg.temperature, cfg.eval_temperature, cfg.c_inv, cfg.clip_eps) == (1.0, 0.4, 0.1, 0.2)


def test_smollm2_recipe():
    env = {"ALGO": "sapo", "ENV_ID": "sapo/Vault-v0", "DEVICE": "cuda", "OUT_DIR": "o", "SEED": "0"}
    cfg = recipe_config("smollm2_one_gpu.sh", env)
    assert (cfg.model, cfg.sft_episodes, cfg.lr) == ("smollm2", 64, 1e-6)


def test_paper_recipe_refuses_to_download(tmp_path):
    proc = subprocess.run(
        ["bash", str(ROOT / "recipes/paper.sh"), "1.5b", "alfworld", "sapo"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "never downloaded" in proc.stderr


def recipe_run_config(script: str, args: list[str], env: dict[str, str], tmp_path: Path):
    """The TrainConfig a recipe really launches: the script runs under bash with a stand-in ``python`` on PATH that
    records its argv (so the script's own NPROC / GENERATOR / "$@" handling applies), parsed by `sapo-gym train`."""
    import os

    from sapo_cli import build_parser

    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text('#!/bin/sh\n[ "$1" = "-c" ] && exit 0\nprintf \'%s\\0\' "$@" > "$ARGV_OUT"\n')
    fake.chmod(0o755)
    argv_file = tmp_path / "argv"
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NPROC", "ZERO_STAGE", "GENERATOR", "DEVICE", "OUT_DIR", "SEED", "MODEL_DIR")
    }
    subprocess.run(
        ["bash", str(ROOT / "recipes" / script), *args],
        cwd=tmp_path,
        check=True,
        timeout=60,
        env={**base, **env, "PATH": f"{fake.parent}:{base['PATH']}", "ARGV_OUT": str(argv_file)},
    )
    argv = argv_file.read_bytes().decode().split("\0")[:-1]
    assert argv[:3] == ["-m", "sapo_cli", "train"], argv
    return from_args(build_parser().parse_args(argv[2:]))


# The GPU presets of `sapo-gym compare` and the recipe command lines they stand for. compare runs each
# run in one process (it launches no torchrun runs), so the paper's line is paper.sh's one-process form.
PRESET_RECIPES = {
    "paper-1.5b": (
        "paper.sh",
        ["1.5b", "alfworld"],
        ["--bf16"],
        {"GENERATOR": "vllm", "MODEL_DIR": "Qwen/Qwen2.5-1.5B-Instruct"},
    ),
    "paper-7b": (
        "paper.sh",
        ["7b", "alfworld"],
        ["--bf16"],
        {"GENERATOR": "vllm", "MODEL_DIR": "Qwen/Qwen2.5-7B-Instruct"},
    ),
    "smollm2-1gpu": ("smollm2_one_gpu.sh", [], ["alfworld"], {}),
}
IGNORED = {
    "out_dir": "where the run writes: the recipe's runs/<...>/ against compare's OUT/runs/<algo>-seed<k>/",
    "resume": "compare resumes an interrupted run from its own checkpoint; a first run has none, so it trains the same",
    "checkpoint_every": "compare checkpoints every iteration so a killed compare loses at most one; saving changes no number",
    "group_size": "the recipe leaves 0 (the method's default: 8 for GRPO, 1 else), compare sets G explicitly; "
    "rollouts_per_task, the value both mean, is compared instead",
}


@pytest.mark.parametrize("preset", sorted(PRESET_RECIPES))
@pytest.mark.parametrize("algo", ["sapo", "ppo", "grpo", "gigpo", "rloo"])
def test_gpu_presets_are_the_recipes_runs(preset, algo, tmp_path):
    import dataclasses

    from trainers.compare.config import PRESETS, CompareConfig

    script, head, tail, env = PRESET_RECIPES[preset]
    if "MODEL_DIR" in env:  # paper.sh insists on a local HF folder: the preset's model id, as a relative path
        (tmp_path / env["MODEL_DIR"]).mkdir(parents=True)
        (tmp_path / env["MODEL_DIR"] / "config.json").write_text("{}")
    args = [*head, algo, *tail] if script == "paper.sh" else [algo, *tail]
    recipe = recipe_run_config(script, args, {**env, "SEED": "1"}, tmp_path)
    ours = PRESETS[preset].apply(CompareConfig()).train_config(algo, 1)
    assert ours.rollouts_per_task == recipe.rollouts_per_task and ours.num_tasks == recipe.num_tasks
    mine, theirs = dataclasses.asdict(ours), dataclasses.asdict(recipe)
    assert {k: v for k, v in mine.items() if k not in IGNORED} == {k: v for k, v in theirs.items() if k not in IGNORED}
    if script == "paper.sh":
        assert (ours.bf16, ours.generator, ours.strategy) == (True, "vllm", "torch")  # one process: no DeepSpeed
