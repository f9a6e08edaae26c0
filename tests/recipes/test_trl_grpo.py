"""recipes/trl_grpo.py: TRL's multi-turn GRPO (``environment_factory``) steps the env, in process and served.

The commands are the ones docs/remote.md gives: ``recipes/trl_tiny.py`` warm-starts an offline tiny Qwen2 to
call ``take_action`` (random commands: it knows the format, not the task), then ``trl_grpo.py`` trains it for
2 optimizer steps on ``sapo/Vault-v0`` (one button of two: a random press wins half the time). Every rollout's
episode is logged by the env objects themselves, so the test checks TRL's own metrics against them: the env was
stepped once per tool call TRL parsed, the reward TRL logs is the env's return, and the gradient is non-zero
exactly in the steps where the env's rewards differ inside a group (beta 0: the advantages are the only signal).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("openenv.core.env_server")

from tests.support.remote import ROOT, http, served  # noqa: E402

VAULT = ["--env", "sapo/Vault-v0", "--env-arg", "code_length=1", "--env-arg", "num_buttons=2"]
SERVE = [
    "--env-arg",
    "protocol=tool-call-v1",
    "--env-arg",
    "code_length=1",
    "--env-arg",
    "num_buttons=2",
    "--max-sessions",
    "16",
]
BATCH, STEPS = 8, 2
"""The recipe's defaults (--batch-size, --max-steps): 8 rollouts (2 prompts x 4 generations) a step, 2 steps."""


def _recipe():
    """recipes/trl_grpo.py as a module (it is a script, not a package module)."""
    spec = importlib.util.spec_from_file_location("trl_grpo", ROOT / "recipes" / "trl_grpo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tiny_tools(tmp_path_factory) -> Path:
    """The warm-started tiny model, made by the documented command (a subprocess: a user's fresh interpreter)."""
    out = tmp_path_factory.mktemp("tiny-tools")
    cmd = [sys.executable, "recipes/trl_tiny.py", "--out", str(out), *VAULT]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def check_the_env_was_trained_on(summary: dict) -> None:
    log, episodes = summary["log"], summary["episodes"]
    assert len(log) == STEPS and len(episodes) == BATCH * STEPS  # every rollout scored once, by its own env
    assert (
        summary["env_steps"] > 0 and summary["valid_calls"] == summary["env_steps"]
    )  # TRL's parsed calls, valid to the env
    for step, entry in enumerate(log):
        mine = episodes[step * BATCH : (step + 1) * BATCH]
        calls = round(entry["tools/call_frequency"] * BATCH)
        failures = round(entry["tools/failure_frequency"] * calls)
        assert sum(e["steps"] for e in mine) == calls - failures  # one env step per tool call that ran
        returns = [e["return"] for e in mine]
        assert all(e["return"] == (10.0 if e["won"] else 0.0) for e in mine)
        # the env is the only reward source: TRL's reward is its return (multiples of 1.25: exact in float32)
        assert entry["rewards/SapoToolEnv/mean"] == entry["reward"] == sum(returns) / BATCH
        groups = [returns[i : i + 4] for i in range(0, BATCH, 4)]
        assert entry["frac_reward_zero_std"] == sum(len(set(g)) == 1 for g in groups) / len(groups)
        assert (entry["grad_norm"] > 0) == any(
            len(set(g)) > 1 for g in groups
        )  # the env's rewards are the loss's signal
    assert any(entry["grad_norm"] > 0 for entry in log)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_trl_grpo_steps_the_env_in_process_and_served(tiny_tools: Path, tmp_path: Path, monkeypatch) -> None:
    recipe = _recipe()
    common = ["--model", str(tiny_tools), "--out-dir", str(tmp_path / "run")]
    local = recipe.main(common + VAULT)
    check_the_env_was_trained_on(local)

    with served("sapo/Vault-v0", *SERVE) as url:
        open_at_close = []
        real_close = recipe.EnvPool.close

        def close(pool):  # the sessions are open while the trainer runs, and the recipe closes them all
            open_at_close.append(http("GET", f"{url}/sessions")[1]["active_sessions"])
            real_close(pool)
            open_at_close.append(http("GET", f"{url}/sessions")[1]["active_sessions"])

        monkeypatch.setattr(recipe.EnvPool, "close", close)
        remote = recipe.main(common + ["--env", "sapo/Vault-v0", "--url", url])
    check_the_env_was_trained_on(remote)
    assert open_at_close == [BATCH, 0]  # one session per rollout env, none left behind
    # the served env plays as the local one: the same rollouts, the same rewards, the same updates
    assert remote["episodes"] == local["episodes"]
    keys = ("reward", "reward_std", "tools/call_frequency", "grad_norm", "loss")
    assert [[e[k] for k in keys] for e in remote["log"]] == [[e[k] for k in keys] for e in local["log"]]


def test_a_server_of_another_protocol_is_refused() -> None:
    recipe = _recipe()
    with served("sapo/Vault-v0") as url:
        with pytest.raises(ValueError, match="protocol=tool-call-v1"):
            recipe.env_maker("sapo/Vault-v0", {}, url)()
        assert http("GET", f"{url}/sessions")[1]["active_sessions"] == 0


def test_the_tool_trl_shows_the_model_is_the_envs_own() -> None:
    """TRL builds the tool schema from take_action's signature and docstring: it is sapo_gym.tools' schema."""
    from transformers.utils import get_json_schema

    from sapo_gym.tools import tool_schema

    ours, trls = tool_schema()[0], get_json_schema(_recipe().SapoToolEnv.take_action)
    ours["function"]["parameters"].pop("additionalProperties")  # what a Python signature cannot say
    assert trls["function"].pop("return") == {"type": "string"}  # what the OpenAI schema does not say
    assert trls == ours
