"""NeMo-Gym (NVIDIA-NeMo/Gym, ``pip install 'sapo-gym[nemo-gym]'``, nemo-gym 0.4.0, Python >= 3.12): every
registered env as a NeMo-Gym resources server, played by NeMo-Gym's own ``gymnasium_agent``.

NeMo-Gym runs an env as a *resources server* (a FastAPI app) that an *agent* server drives; its
``gymnasium_agent`` plays Gymnasium-style servers (``resources_servers.gymnasium.GymnasiumServer``: ``/reset``,
then ``/step`` with each model response until ``terminated`` or ``truncated``), and ``gym eval run`` (formerly
``ng_collect_rollouts``) sends each row of a JSONL dataset to an agent and writes one rollout per row. This module
is the part that needs no NeMo-Gym: the project a run needs (:func:`write_project`: the server's entry point, its
config with each env's identity, one dataset per env, a policy-model config) and the reply text the env steps
(:func:`reply_text`). The server class, which imports NeMo-Gym, is :mod:`sapo_gym.integrations.nemo_gym_server`;
the episodes themselves are :class:`sapo_gym.integrations.episodes.EpisodePlay`, as in the other adapters.

What travels: a dataset row is a task row of :func:`sapo_gym.integrations.episodes.task_rows` (env id, split,
task, seed, ``gym.make`` arguments, protocol, horizon, spec hash, prompt template) under ``row["sapo_gym"]``, so
NeMo-Gym hands it to the server's reset; the server's config lists the same identity per env and the server refuses
to start when an env it builds has another spec hash, and rows of an env it was not configured with. The final
step's ``info["sapo_gym"]`` is the episode's payload (:meth:`~sapo_gym.integrations.episodes.EpisodePlay.payload`),
which lands in each rollout of ``gym eval run``; ``sapo-gym bundle ROLLOUTS`` turns one env's rollouts into a
result bundle. The observation the agent appends to the conversation is the env's own prompt string, the one
``gym.make(id)`` returns in process; ``gymnasium_agent`` keeps the whole conversation, so the model also sees the
earlier prompts (the prompt is not in the spec hash: boards rank results whatever prompt the agent read).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sapo_gym.integrations.episodes import PAYLOAD_KEY
from sapo_gym.registration import ENVS

__all__ = [
    "NEMO_GYM_VERSION",
    "SERVER",
    "AGENT",
    "MODEL",
    "board_split",
    "env_entry",
    "reply_text",
    "dataset_rows",
    "write_project",
]

NEMO_GYM_VERSION = "0.4.0"
"""The NeMo-Gym release this adapter is written and tested against (the ``nemo-gym`` extra pins it)."""
SERVER = "sapo_gym"
"""The resources server's folder in a project (``resources_servers/sapo_gym``) and its config instance's name."""
AGENT = "sapo_gym_agent"
"""The config instance of NeMo-Gym's ``gymnasium_agent`` that plays the server (``+agent_name=sapo_gym_agent``)."""
MODEL = "policy_model"
"""The model server the agent calls: NeMo-Gym's ``vllm_model`` (any OpenAI-compatible chat-completions endpoint)."""
_IDENTITY = ("env_id", "split", "env_args", "protocol", "horizon", "prompt_template", "spec_hash")
"""What the server's config records of each env: a task row's keys but the task and the seed."""


def board_split(env_id: str, split: str | None = None) -> str | None:
    """``split``, else the id's first evaluation split (its first board's), else None (the env's default)."""
    if env_id not in ENVS:
        raise ValueError(f"unknown env id {env_id!r}; registered: {sorted(ENVS)}")
    return split if split is not None else next(iter(ENVS[env_id].eval_splits), None)


def env_entry(row: Mapping[str, Any]) -> dict[str, Any]:
    """The entry of the server config's ``envs`` list for the env of task row ``row``."""
    return {k: row[k] for k in _IDENTITY}


def reply_text(output: Sequence[Mapping[str, Any]]) -> str:
    """The model's reply as text, from a NeMo-Gym response's ``output`` items (dicts): message text as it is,
    reasoning items back in ``<think>`` tags (the form NeMo-Gym's reasoning parser took them out of), in order.

    With the project's model config (``uses_reasoning_parser: false``) a reply has no reasoning item and comes back
    verbatim; with the parser on, a reply that starts with its one ``<think>`` block comes back verbatim too."""
    parts: list[str] = []
    for item in output:
        if item.get("type") == "reasoning":
            parts.append("".join(f"<think>{s.get('text', '')}</think>" for s in item.get("summary") or ()))
        elif item.get("type") == "message" and item.get("role", "assistant") == "assistant":
            content = item.get("content")
            if isinstance(content, str):
                parts.append(content)
            else:
                parts.extend(c.get("text", "") for c in content or () if c.get("type") == "output_text")
    return "".join(parts)


def dataset_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """NeMo-Gym dataset rows of task rows: an empty input (the reset's observation is the first prompt), the agent,
    and the task row under ``"sapo_gym"`` (NeMo-Gym passes a row's other keys to the server's reset and step)."""
    return [
        {
            "responses_create_params": {"input": []},
            "agent_ref": {"type": "responses_api_agents", "name": AGENT},
            PAYLOAD_KEY: dict(row),
        }
        for row in rows
    ]


def _yaml(value: Any, indent: int = 0) -> list[str]:
    """``value`` (dicts, lists, JSON scalars) as block YAML lines; scalars and empty containers as JSON (valid YAML)."""
    pad = " " * indent
    if isinstance(value, dict) and value:
        lines = []
        for key, item in value.items():
            nested = isinstance(item, (dict, list)) and item
            lines.append(f"{pad}{key}:" + ("" if nested else " " + json.dumps(item)))
            lines += _yaml(item, indent + 2) if nested else []
        return lines
    if isinstance(value, list) and value:
        lines = []
        for item in value:
            inner = (
                _yaml(item, indent + 2) if isinstance(item, (dict, list)) and item else [f"{pad}  {json.dumps(item)}"]
            )
            lines += [f"{pad}- {inner[0].lstrip()}", *inner[1:]]
        return lines
    return [pad + json.dumps(value)]


_APP = '''"""NeMo-Gym entry point of the sapo_gym resources server (written by `sapo-gym nemo-gym init`)."""

from sapo_gym.integrations.nemo_gym_server import SapoGymServer

if __name__ == "__main__":
    SapoGymServer.run_webserver()
'''


def _slug(entry: Mapping[str, Any]) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", f"{entry['env_id']}_{entry['split']}").strip("_").lower()


def _server_config(entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    datasets = [
        {"name": _slug(e), "type": "example", "jsonl_fpath": f"resources_servers/{SERVER}/data/{_slug(e)}.jsonl"}
        for e in entries
    ]
    return {
        SERVER: {
            "resources_servers": {
                SERVER: {
                    "entrypoint": "app.py",
                    "domain": "agent",
                    "verified": False,
                    "description": "sapo_gym text envs: " + ", ".join(f"{e['env_id']}:{e['split']}" for e in entries),
                    "value": "multi-turn text envs (<think>/<action> replies) with their spec hashes",
                    "envs": list(entries),
                }
            }
        },
        AGENT: {
            "responses_api_agents": {
                "gymnasium_agent": {
                    "entrypoint": "app.py",
                    "resources_server": {"type": "resources_servers", "name": SERVER},
                    "model_server": {"type": "responses_api_models", "name": MODEL},
                    # the env's TimeLimit ends every episode at its horizon; the agent's cap is never the one that stops it
                    "max_steps": max(int(e["horizon"]) for e in entries),
                    "datasets": datasets,
                }
            }
        },
    }


def _model_config() -> dict[str, Any]:
    """NeMo-Gym's ``vllm_model`` (chat completions) with the reply passed through as text: no reasoning parser, so
    the ``<think>`` block stays in the reply the env parses."""
    return {
        MODEL: {
            "responses_api_models": {
                "vllm_model": {
                    "entrypoint": "app.py",
                    "base_url": "${policy_base_url}",
                    "api_key": "${policy_api_key}",
                    "model": "${policy_model_name}",
                    "return_token_id_information": False,
                    "uses_reasoning_parser": False,
                    "uses_interleaved_reasoning": False,
                    "chat_template_kwargs": None,
                    "extra_body": None,
                    "default_headers": {},
                }
            }
        }
    }


_VENV_SERVERS = (
    f"resources_servers/{SERVER}",
    "responses_api_agents/gymnasium_agent",
    "responses_api_models/vllm_model",
)
"""The servers a run starts, by folder: NeMo-Gym looks for each one's venv at ``<project>/<folder>/.venv``."""


def _link_venv(root: Path, venv: str) -> None:
    for folder in _VENV_SERVERS:
        link = root / folder / ".venv"
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(Path(venv).resolve(), target_is_directory=True)


def write_project(
    directory: str | os.PathLike[str],
    plans: Sequence[Sequence[Mapping[str, Any]]],
    venv: str | None = None,
    settings: Mapping[str, Any] | None = None,
) -> Path:
    """Write (or rewrite) a NeMo-Gym project in ``directory`` for ``plans`` (each the task rows of one env, as
    :func:`~sapo_gym.integrations.episodes.task_rows` makes them); returns the server config's path.

    It holds ``resources_servers/sapo_gym/`` (``app.py``, ``requirements.txt``, ``configs/sapo_gym.yaml``, one
    dataset per env under ``data/``), ``configs/policy_model.yaml``, ``env.yaml`` (``settings``: NeMo-Gym's own
    keys, e.g. ``policy_base_url``) and an empty ``results/`` (``gym eval run`` 0.4.0 does not create its output's
    folder). ``venv``: a virtualenv holding nemo-gym and sapo-gym that every server runs in (each server's ``.venv``
    is a link to it and ``skip_venv_if_present`` is set); without one NeMo-Gym builds a venv per server with uv from
    the requirements files, which needs an index that serves sapo-gym.
    """
    entries = [env_entry(rows[0]) for rows in plans if rows]
    if len(entries) != len(plans) or not entries:
        raise ValueError("a project needs at least one env, each with at least one task row")
    keys = [(e["env_id"], e["split"]) for e in entries]
    if len(set(keys)) != len(keys):
        raise ValueError(f"an env and split appear twice: {keys}")
    root = Path(directory)
    server = root / "resources_servers" / SERVER
    for folder in (server / "configs", server / "data", root / "configs", root / "results"):
        folder.mkdir(parents=True, exist_ok=True)
    (server / "app.py").write_text(_APP)
    (server / "requirements.txt").write_text(f"sapo-gym[nemo-gym]\nnemo-gym=={NEMO_GYM_VERSION}\n")
    for entry, rows in zip(entries, plans):
        (server / "data" / f"{_slug(entry)}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in dataset_rows(rows))
        )
    config = server / "configs" / f"{SERVER}.yaml"
    config.write_text("\n".join(_yaml(_server_config(entries))) + "\n")
    (root / "configs" / f"{MODEL}.yaml").write_text("\n".join(_yaml(_model_config())) + "\n")
    env_yaml = dict(settings or {})
    if venv is not None:
        env_yaml["skip_venv_if_present"] = True
        _link_venv(root, venv)
    (root / "env.yaml").write_text("\n".join(_yaml(env_yaml)) + "\n" if env_yaml else "{}\n")
    return config
