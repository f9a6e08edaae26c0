"""TrainConfig ⇄ argparse: every field is a flag, its docstring is its help, values round-trip."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from trainers.config import ALGOS, TrainConfig, add_arguments, field_docs, field_help, from_args


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="train")
    add_arguments(parser)
    return parser


def test_every_field_has_a_docstring_and_appears_in_help():
    docs = field_docs(TrainConfig)
    help_text = " ".join(_parser().format_help().split())
    for f in dataclasses.fields(TrainConfig):
        assert docs.get(f.name), f"field {f.name} has no docstring"
        assert "--" + f.name.replace("_", "-") in help_text
        assert " ".join(field_help(TrainConfig, f.name).split()[:4]) in help_text


def test_defaults_round_trip():
    assert from_args(_parser().parse_args([])) == TrainConfig()


def test_non_default_values_round_trip():
    want = TrainConfig(
        algo="grpo",
        env="sapo/Vault-v0",
        env_arg=["code_length=3", "show_hints=False"],
        lr=3e-4,
        iterations=7,
        resume=True,
        progress=False,
        group_size=4,
        episodes_per_iteration=8,
        gamma=0.9,
        grpo_stats_across_steps=True,
        sft_episodes=12,
        prompt="plain",
    )
    argv = [
        "--algo",
        "grpo",
        "--env",
        "sapo/Vault-v0",
        "--env-arg",
        "code_length=3",
        "--env-arg",
        "show_hints=False",
        "--lr",
        "3e-4",
        "--iterations",
        "7",
        "--resume",
        "--no-progress",
        "--group-size",
        "4",
        "--episodes-per-iteration",
        "8",
        "--gamma",
        "0.9",
        "--grpo-stats-across-steps",
        "--sft-episodes",
        "12",
        "--prompt",
        "plain",
    ]
    got = from_args(_parser().parse_args(argv))
    assert got == want
    assert got.parsed_env_args() == {"code_length": 3, "show_hints": False}
    assert got.num_tasks == 2 and got.rollouts_per_task == 4


def test_paper_defaults():
    cfg = TrainConfig()
    assert (cfg.lr, cfg.kl_coef, cfg.clip_eps, cfg.history_length, cfg.max_response_tokens) == (1e-6, 0.01, 0.2, 2, 512)
    assert (cfg.temperature, cfg.eval_temperature, cfg.c_inv) == (1.0, 0.4, 0.1)
    assert TrainConfig(algo="sapo").rollouts_per_task == 1 and TrainConfig(algo="ppo").rollouts_per_task == 1
    assert TrainConfig(algo="grpo").rollouts_per_task == 8
    assert TrainConfig(algo="gigpo").rollouts_per_task == 8 and TrainConfig(algo="rloo").rollouts_per_task == 8
    # equal env interactions per iteration: same number of episodes for every method
    assert {TrainConfig(algo=a).num_tasks * TrainConfig(algo=a).rollouts_per_task for a in ALGOS} == {16}
    for name in ("gamma", "lam", "tau_v", "value_coef", "q_coef", "value_clip", "q_clip"):
        assert "not printed in the paper" in field_docs(TrainConfig)[name]


def test_gigpo_defaults_are_verl_agents():
    # verl-agent: algorithm.gigpo.step_advantage_w=1.0, mode "mean_norm" (or "mean_std_norm"), its GiGPO scripts'
    # algorithm.gamma=0.95
    cfg = TrainConfig(algo="gigpo")
    assert (cfg.gigpo_step_weight, cfg.gigpo_gamma, cfg.gigpo_mode) == (1.0, 0.95, "mean_norm")
    assert TrainConfig(algo="gigpo", gigpo_mode="mean_std_norm").gigpo_mode == "mean_std_norm"
    assert from_args(_parser().parse_args(["--algo", "rloo", "--gigpo-mode", "mean_std_norm"])).algo == "rloo"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"algo": "dqn"},
        {"algo": "grpo", "episodes_per_iteration": 12},
        {"algo": "gigpo", "episodes_per_iteration": 12},
        {"gigpo_mode": "std"},
        {"iterations": 0},
        {"prompt": "fancy"},
    ],
)
def test_bad_values_are_rejected(kwargs):
    with pytest.raises(ValueError):
        TrainConfig(**kwargs)


def test_bad_algo_flag_is_an_argparse_error():
    with pytest.raises(SystemExit):
        _parser().parse_args(["--algo", "dqn"])


def test_env_arg_must_be_key_value():
    with pytest.raises(ValueError, match="KEY=VALUE"):
        TrainConfig(env_arg=["code_length"]).parsed_env_args()


def test_prompt_takes_a_shipped_template_by_name():
    import gymnasium as gym

    import sapo_gym  # noqa: F401

    cfg = TrainConfig(prompt="alfworld/verl-agent@796ed31")
    env = gym.make("sapo/ALFWorld-Mini-v0", **cfg.gym_make_kwargs())
    try:
        assert env.unwrapped.spec_fields()["prompt"] == "alfworld/verl-agent@796ed31"
    finally:
        env.close()
    assert TrainConfig().gym_make_kwargs()["prompt"] == "default"


def test_prompt_plain_is_an_alias_the_env_resolves():
    import gymnasium as gym

    import sapo_gym  # noqa: F401
    from sapo_gym.prompts import PLAIN_PROMPT

    env = gym.make("sapo/ALFWorld-Mini-v0", **TrainConfig(prompt="plain").gym_make_kwargs())  # its default: ALFWorld's
    try:
        assert env.unwrapped.spec_fields()["prompt"] == PLAIN_PROMPT.name
    finally:
        env.close()
    with pytest.raises(ValueError, match="valid choices: .*'plain'"):
        TrainConfig(prompt="plane")
