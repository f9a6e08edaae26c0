"""NeMo-Gym plays the registered envs through its own code: ``gym env start`` runs the sapo_gym resources server,
NeMo-Gym's ``gymnasium_agent`` and its ``vllm_model`` server (pointed at a scripted OpenAI-compatible stand-in on
127.0.0.1), and ``gym eval run --no-serve`` collects the rollouts; every episode must equal in-process play of the
same task and seed with the same replies, and the rollouts must make bundles that replay (and, for a whole split,
that a board admits).

NeMo-Gym needs Python 3.12: it lives in the venv ``scripts/setup_nemo_gym.sh`` builds (``scripts/setup.sh`` calls
it); without that venv the NeMo-Gym tests skip. The light-install checks run everywhere.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import sapo_gym  # noqa: F401  (registers the ids)
from sapo_gym.integrations.episodes import PAYLOAD_KEY, task_rows
from sapo_gym.integrations.nemo_gym import AGENT, SERVER, board_split, dataset_rows, reply_text, write_project
from tests.support.blocked import run_without
from tests.support.fake_openai import FakeOpenAI
from tests.support.integrations import expert_reply, play, scripted_model

ROOT = Path(__file__).resolve().parents[3]
VENV = Path(os.environ.get("NEMO_GYM_VENV", Path.home() / ".cache" / "sapo_gym" / "nemo-gym-venv"))
STAMP = VENV / ".sapo_gym_nemo_gym_0.4.0"
VAULT, ALFWORLD, WEBSHOP = "sapo/Vault-v0", "sapo/ALFWorld-Mini-v0", "sapo/WebShop-Mini-v0"
PLAN = (
    (ALFWORLD, 2, (3,)),
    (WEBSHOP, 2, (3,)),
    ("sapo/ALFWorld-v0", 1, (0,)),
    ("sapo/WebShop-v0", 1, (0,)),
    (VAULT, None, (0,)),
)
"""(env, first tasks of its evaluation split (None: all of them, a board's whole split), seeds): every registered text
env (WebShop-Browser is WebShop's shop behind a browser, on WebShop's boards)."""
needs_venv = pytest.mark.skipif(
    not (STAMP.exists() and (VENV / "bin" / "gym").exists()),
    reason=f"no NeMo-Gym venv at {VENV} (bash scripts/setup_nemo_gym.sh builds it: Python 3.12)",
)


def detour_reply(env_id: str, task_index: int, turn: int, prompt: str, info: dict[str, Any]) -> str:
    """The expert's move, except a few detours: an untagged reply then an inadmissible action in the first task of
    ALFWorld and WebShop, and in Vault a ``look`` (blue first hint) or a wrong button (green first hint, a loss).
    Each detour is a function of the prompt, so one script answers every episode."""
    if env_id == VAULT and turn == 0 and "glows blue" in prompt:
        return "<think>not yet</think><action>look</action>"
    if env_id == VAULT and turn == 0 and "glows green" in prompt:
        return "<think>a guess</think><action>press red</action>"
    if env_id != VAULT and task_index == 0 and turn < 2:
        return ("an answer without its tags", "<think>hm</think><action>fly to the moon</action>")[turn]
    return expert_reply(info["expert_action"])


def detour_script(rows: list[dict[str, Any]]) -> tuple[dict[str, str], dict[tuple[int, str], list[str]]]:
    """(prompt -> reply, each (seed, task)'s replies) over the episodes of one env's task rows, played in process."""
    env = gym.make(rows[0]["env_id"], split=rows[0]["split"])
    ids = list(dict.fromkeys(row["task_id"] for row in rows))
    script: dict[str, str] = {}
    replies: dict[tuple[int, str], list[str]] = {}
    for row in rows:
        prompt, info = env.reset(seed=row["seed"], options={"task_id": row["task_id"]})
        said = replies.setdefault((row["seed"], row["task_id"]), [])
        done = False
        while not done:
            reply = detour_reply(row["env_id"], ids.index(row["task_id"]), len(said), prompt, info)
            assert script.setdefault(prompt, reply) == reply, "the script answers one prompt two ways"
            said.append(reply)
            prompt, _, terminated, truncated, info = env.step(reply)
            done = terminated or truncated
    env.close()
    return script, replies


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env() -> dict[str, str]:
    """The checkout first on the path (a venv built from another clone runs this one's code); Ray on the loopback."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
    return {
        **env,
        "PYTHONPATH": str(ROOT),
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "RAY_USAGE_STATS_ENABLED": "0",
        "WANDB_MODE": "disabled",
        "PYTHONUNBUFFERED": "1",
    }


@contextmanager
def servers(project: Path, timeout: float = 150.0) -> Iterator[None]:
    """``gym env start`` in ``project`` until its servers are ready; stopped with Ctrl-C (its own shutdown: the
    servers and the Ray it started), then killed with its process group if it lingers."""
    log = project / "servers.log"
    configs = [f"--config=resources_servers/{SERVER}/configs/{SERVER}.yaml", "--config=configs/policy_model.yaml"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(VENV / "bin" / "gym"), "env", "start", *configs],
            cwd=project,
            env=_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + timeout
        while not re.search(r"All \d+ / \d+ servers ready", log.read_text(errors="replace")):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"gym env start did not get its servers up:\n{log.read_text(errors='replace')[-4000:]}")
            time.sleep(0.5)
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _transcript_prompts(rollout: dict[str, Any]) -> list[str]:
    """The prompts NeMo-Gym showed the model: the reset's, then each step's, as its conversation holds them."""
    first = [m["content"] for m in rollout["responses_create_params"]["input"]]
    return first + [item["content"] for item in rollout["response"]["output"] if item.get("role") == "user"]


def _transcript_replies(rollout: dict[str, Any]) -> list[str]:
    """The model's replies in NeMo-Gym's transcript: the output items between the env's prompts, one reply a turn."""
    turns: list[list[dict[str, Any]]] = [[]]
    for item in rollout["response"]["output"]:
        turns.append([]) if item.get("role") == "user" else turns[-1].append(item)
    return [reply_text(items) for items in turns]


@pytest.fixture(scope="module")
def nemo_run(tmp_path_factory) -> tuple[list[str], dict, list, str]:
    """One NeMo-Gym run over the plan: (rollout lines, the in-process episodes, each env's task rows, NeMo-Gym's
    aggregate metrics file)."""
    plans = [
        [row for row, _ in task_rows(env_id, board_split(env_id), seeds, limit=limit)] for env_id, limit, seeds in PLAN
    ]
    script, played = {}, {}
    for rows in plans:
        prompts, replies = detour_script(rows)
        script.update(prompts)
        for (seed, task_id), said in replies.items():
            played[(rows[0]["env_id"], seed, task_id)] = (
                said,
                play(rows[0]["env_id"], rows[0]["split"], task_id, seed, said),
            )

    project = tmp_path_factory.mktemp("nemo-gym-project")
    with FakeOpenAI(reply=scripted_model(script)) as model:
        settings = {
            "head_server": {"host": "127.0.0.1", "port": _free_port()},
            "policy_base_url": model.url,
            "policy_api_key": "none",
            "policy_model_name": "scripted",
        }
        write_project(project, plans, venv=str(VENV), settings=settings)
        rows = "".join(json.dumps(row) + "\n" for rows in plans for row in dataset_rows(rows))
        (project / "rows.jsonl").write_text(rows)
        with servers(project):
            collect = subprocess.run(
                [
                    str(VENV / "bin" / "gym"),
                    "eval",
                    "run",
                    "--no-serve",
                    f"+agent_name={AGENT}",
                    "+input_jsonl_fpath=rows.jsonl",
                    "+output_jsonl_fpath=results/rollouts.jsonl",
                ],
                cwd=project,
                env=_env(),
                capture_output=True,
                text=True,
                timeout=180,
            )
    assert collect.returncode == 0, collect.stdout[-3000:] + collect.stderr[-3000:]
    lines = (project / "results" / "rollouts.jsonl").read_text().splitlines()
    return lines, played, plans, (project / "results" / "rollouts_aggregate_metrics.json").read_text()


@pytest.mark.slow
@needs_venv
def test_each_episode_equals_in_process_play(nemo_run):
    lines, played, plans, aggregate = nemo_run
    assert len(lines) == len(played) == sum(map(len, plans))
    seen = set()
    for rollout in map(json.loads, lines):
        payload = rollout["info"][PAYLOAD_KEY]
        episode, row = payload["record"], payload["row"]
        key = (row["env_id"], episode["seed"], episode["task_id"])
        (replies, expected), seen = played[key], seen | {key}
        assert expected.done and expected.turns == len(replies), key  # the replies play the whole episode in process
        assert _transcript_prompts(rollout) == expected.prompts, key  # the prompts the model saw
        assert _transcript_replies(rollout) == replies, key  # what it answered, as NeMo-Gym logged it
        assert [t["output"] for t in episode["turns"]] == replies, key  # what the env stepped
        assert [t["observation"] for t in episode["turns"]] == expected.raw_observations, key
        assert [t["reward"] for t in episode["turns"]] == expected.rewards, key  # the same floats: the same arithmetic
        assert (episode["success"], episode["steps"], payload["complete"]) == (
            expected.success,
            expected.turns,
            True,
        ), key
        assert (rollout["terminated"] or rollout["truncated"]) and rollout["reward"] == sum(expected.rewards), key
    assert seen == set(played)
    detours = [said for said, _ in played.values() if any("<action>" not in r or "fly to the moon" in r for r in said)]
    outcomes = {p.success for _, p in played.values()}
    assert len(detours) == len(PLAN) - 1 and outcomes == {True, False}  # the detours and a loss went through NeMo-Gym
    (metrics,) = json.loads(aggregate)  # NeMo-Gym's metrics file, with the server's per-category summary
    wins = [p.success for _, p in played.values()]
    assert (metrics["agent_metrics"]["sapo_gym/all/episodes"], metrics["agent_metrics"]["sapo_gym/all/success"]) == (
        len(wins),
        sum(wins) / len(wins),
    )


@pytest.mark.slow
@needs_venv
def test_identity_travels_and_rollouts_make_bundles_that_replay(nemo_run, tmp_path):
    from leaderboard.boards import BoardRegistry
    from leaderboard.checks import admit
    from leaderboard.replay import replay_bundle
    from sapo_cli.bundle import bundle_from_payloads
    from sapo_gym.bundle import AgentInfo, check_bundle
    from sapo_gym.integrations.episodes import read_payloads

    lines, played, plans, _ = nemo_run
    for rows in plans:
        env_id, split = rows[0]["env_id"], rows[0]["split"]
        mine = [line for line in lines if json.loads(line)["info"][PAYLOAD_KEY]["row"]["env_id"] == env_id]
        path = tmp_path / f"{env_id.split('/')[1]}.jsonl"
        path.write_text("\n".join(mine) + "\n")
        payloads = read_payloads(path)
        assert sorted((p["row"]["seed"], p["row"]["task_id"]) for p in payloads) == sorted(
            (r["seed"], r["task_id"]) for r in rows
        )
        for payload in payloads:  # the identity the rows carried, back from NeMo-Gym with each episode
            assert {k: payload["row"][k] for k in ("protocol", "split", "horizon", "spec_hash")} == {
                k: rows[0][k] for k in ("protocol", "split", "horizon", "spec_hash")
            }
        bundle = bundle_from_payloads(payloads, AgentInfo(name="nemo-gym scripted"))
        check_bundle(bundle)
        result = replay_bundle(bundle)
        assert result.verified and result.episodes == len(rows), result.message
        if env_id == VAULT:  # the whole split: the board admits it
            assert admit(bundle, BoardRegistry([VAULT])).key == f"{VAULT}:{split}"


@pytest.mark.slow
@needs_venv
def test_importing_sapo_gym_in_the_nemo_gym_venv_imports_no_nemo_gym():
    code = (
        "import sys, sapo_gym, sapo_gym.integrations.nemo_gym, importlib.util as u; "
        "assert u.find_spec('nemo_gym') is not None; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('nemo_gym', 'resources_servers', 'ray')))"
    )
    out = subprocess.run(
        [str(VENV / "bin" / "python"), "-c", code], env=_env(), capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr[-2000:]


def test_the_server_without_nemo_gym_names_its_extra():
    out = run_without("import sapo_gym.integrations.nemo_gym_server", ["nemo_gym", "resources_servers"], timeout=120)
    assert out.returncode != 0
    assert "MissingExtra" in out.stderr and "pip install 'sapo-gym[nemo-gym]'" in out.stderr, out.stderr[-2000:]


def test_the_extra_pins_nemo_gym_and_the_light_install_leaves_it_out():
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert extras["optional-dependencies"]["nemo-gym"] == ["nemo-gym==0.4.0; python_version >= '3.12'"]
    assert not any("nemo" in r for r in extras["dependencies"] + extras["optional-dependencies"]["all"])


def test_reply_text_puts_reasoning_back_in_think_tags():
    output = [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "the mug is here"}]},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "<action>take mug</action>"}],
        },
    ]
    assert reply_text(output) == "<think>the mug is here</think><action>take mug</action>"
    assert reply_text([{"type": "message", "role": "assistant", "content": "as it is"}]) == "as it is"


def test_init_writes_a_project_whose_rows_carry_each_env_identity(tmp_path):
    from sapo_cli import main

    assert (
        main(
            [
                "nemo-gym",
                "init",
                str(tmp_path),
                "--env",
                VAULT,
                "--env",
                f"{ALFWORLD}:eval_in_distribution",
                "--seeds",
                "0,1",
                "--limit",
                "2",
                "--model-url",
                "http://127.0.0.1:9/v1",
                "--model-name",
                "m",
            ]
        )
        == 0
    )
    data = tmp_path / "resources_servers" / SERVER / "data"
    rows = [
        json.loads(line)
        for name in ("sapo_vault_v0_test", "sapo_alfworld_mini_v0_eval_in_distribution")
        for line in (data / f"{name}.jsonl").read_text().splitlines()
    ]
    assert [(r[PAYLOAD_KEY]["env_id"], r[PAYLOAD_KEY]["seed"]) for r in rows] == [(VAULT, 0)] * 2 + [(VAULT, 1)] * 2 + [
        (ALFWORLD, 0)
    ] * 2 + [(ALFWORLD, 1)] * 2
    env = gym.make(ALFWORLD, split="eval_in_distribution")
    assert rows[-1][PAYLOAD_KEY]["spec_hash"] == env.unwrapped.spec_hash() and rows[-1]["agent_ref"]["name"] == AGENT
    env.close()
    config = (tmp_path / "resources_servers" / SERVER / "configs" / f"{SERVER}.yaml").read_text()
    assert f'spec_hash: "{rows[-1][PAYLOAD_KEY]["spec_hash"]}"' in config and "max_steps: 50" in config
    assert (tmp_path / "env.yaml").read_text().splitlines() == [
        'policy_base_url: "http://127.0.0.1:9/v1"',
        'policy_model_name: "m"',
        'policy_api_key: "EMPTY"',
    ]
    assert not (tmp_path / "responses_api_agents").exists()  # no venv with nemo-gym here: NeMo-Gym builds its own
