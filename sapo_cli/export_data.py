"""The dataset ``sapo-gym export`` writes: one row per turn, replayed from the file's episodes.

Neither an episodes log nor a bundle records the prompts, only what the agent wrote and what the env answered. So
every episode is replayed in the env the file claims (:func:`sapo_cli.export_read.build_env`), stepping its recorded
outputs (:func:`leaderboard.replay.replay_episode`: the observations, rewards and outcome must come back exactly),
and each turn's prompt and ``info["messages"]`` (:mod:`sapo_gym.messages`) are read off the env as the agent saw them.

Each row's ``messages`` (the ``view``):

* ``chat`` (default): ``info["messages"]`` (system, then the history the prompt shows, then the current turn as
  ``user``, or ``tool`` under ``tool-call-v1``), then the turn's reply as ``assistant``: the agent's raw output
  (under ``tool-call-v1``, the assistant message the output's JSON holds);
* ``prompt``: the env's prompt string as one ``user`` message, then the output as ``assistant``: what the
  project's own policy (:class:`agents.llm.LLMAgent`) is given and writes.

With a tokenizer, ``input_ids`` is the conversation through its chat template and ``assistant_masks`` is 1 on the
tokens of the turn's reply (its end-of-turn token included) and 0 elsewhere (the prompt, the history's replies):
the columns TRL's ``SFTTrainer`` takes as a pre-tokenized dataset. The folder holds ``train.parquet`` and
``metadata.json`` (also the ``DatasetInfo.description`` of :func:`load_export`): the env's id, spec hash, protocol,
prompt, split and what was exported.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from sapo_cli.export_read import ExportError, Source

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "VIEWS",
    "replay_rows",
    "load_tokenizer_for_export",
    "tokenize_row",
    "export_metadata",
    "write_export",
    "load_export",
]

EXPORT_FORMAT = "sapo-gym-export"
EXPORT_VERSION = 1
VIEWS = ("chat", "prompt")
_MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id")


class _Recorder:
    """The env, keeping what each ``reset``/``step`` gave back (the prompt and info of every turn)."""

    def __init__(self, env: Any):
        self.env, self.seen = env, []

    def reset(self, **kwargs: Any) -> Any:
        obs, info = self.env.reset(**kwargs)
        self.seen = [(obs, info)]
        return obs, info

    def step(self, action: str) -> Any:
        out = self.env.step(action)
        self.seen.append((out[0], out[4]))
        return out


def _reply(output: str, action_format: str) -> dict[str, Any]:
    if action_format == "tool-call":
        try:
            message = json.loads(output)
        except ValueError:
            message = None
        if isinstance(message, dict) and isinstance(message.get("tool_calls"), list):
            return {"role": "assistant", "content": message.get("content"), "tool_calls": message["tool_calls"]}
    return {"role": "assistant", "content": output}


def _messages(
    view: str, prompt: str, info: dict[str, Any], output: str, action_format: str, where: str
) -> list[dict[str, Any]]:
    if view == "prompt":
        shown = [{"role": "user", "content": prompt}]
    elif isinstance(info.get("messages"), list):
        shown = [dict(m) for m in info["messages"]]
    else:
        raise ExportError(f"{where}: the env gives no info['messages'] (a raw env, prompt=None): use --view prompt")
    full = shown + [_reply(output, action_format)]
    return [{k: m.get(k) for k in _MESSAGE_KEYS} for m in full]


def _episode_rows(
    env: Any, slot: int | None, episode: dict[str, Any], view: str, action_format: str, where: str
) -> list[dict[str, Any]]:
    from leaderboard.replay import replay_episode

    recorder = _Recorder(env)
    try:
        problem = replay_episode(recorder, episode)
    except (KeyError, TypeError, ValueError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    if problem is not None:
        raise ExportError(f"{where} does not replay in the env it claims: {problem}")
    turns, rows, to_go = episode["turns"], [], sum(float(t["reward"]) for t in episode["turns"])
    for k, turn in enumerate(turns):
        prompt, info = recorder.seen[k]
        rows.append(
            {
                "task_id": episode["task_id"],
                "task_type": episode["task_type"],
                "seed": episode["seed"],
                "slot": slot,
                "turn": k,
                "messages": _messages(view, prompt, info, turn["output"], action_format, where),
                "prompt": prompt,
                "completion": turn["output"],
                "action": turn["action"],
                "valid": turn["valid"],
                "reward": float(turn["reward"]),
                "return_to_go": to_go,
                "last_turn": k == len(turns) - 1,
                "episode_success": episode["success"],
                "episode_score": episode["score"],
                "episode_return": episode["return"],
            }
        )
        to_go -= float(turn["reward"])
    return rows


def replay_rows(source: Source, env: Any, view: str = "chat", successful_only: bool = False) -> list[dict[str, Any]]:
    """One row per turn of every (successful, with ``successful_only``) episode of ``source``, replayed in ``env``."""
    if view not in VIEWS:
        raise ExportError(f"unknown view {view!r}; valid choices: {list(VIEWS)}")
    action_format = getattr(getattr(env.unwrapped, "protocol", None), "action_format", "text")
    rows: list[dict[str, Any]] = []
    for i, (slot, episode) in enumerate(source.episodes):
        if successful_only and not episode["success"]:
            continue
        where = f"{source.path}: episode {i} (task {episode['task_id']!r}, seed {episode['seed']})"
        rows.extend(_episode_rows(env, slot, episode, view, action_format, where))
    if not rows:
        raise ExportError(
            f"{source.path} holds no {'successful ' if successful_only else ''}finished episode to export"
        )
    return rows


def load_tokenizer_for_export(path: str | Path) -> Any:
    """A tokenizer folder (:func:`agents.policy.load_tokenizer`) or a ``tokenizer.json`` file (the project's, or any
    other, wrapped as the policy wraps it); one without a chat template gets the policy's (``agents.offline_models.CHAT_TEMPLATE``)."""
    from agents.offline_models import CHAT_TEMPLATE, TOKENIZER_FILE, project_tokenizer

    where = Path(path)
    if not where.exists():
        raise ExportError(f"--tokenizer {path}: no such file or folder")
    try:
        if where.is_dir():
            from agents.policy import load_tokenizer

            tokenizer = load_tokenizer(where)
        elif where.resolve() == TOKENIZER_FILE.resolve():
            tokenizer = project_tokenizer()
        else:
            from transformers import PreTrainedTokenizerFast

            tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(where))
    except Exception as exc:  # not a tokenizer: transformers raises many kinds
        raise ExportError(
            f"--tokenizer {path}: cannot load a tokenizer from it ({type(exc).__name__}: {exc})"
        ) from None
    if tokenizer.chat_template is None:
        tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def tokenize_row(
    tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
) -> dict[str, list[int]]:
    """``input_ids`` of the conversation and ``assistant_masks``: 1 on the tokens that start inside the last (assistant)
    message's rendering, the prompt being the rest rendered with the generation prompt."""
    clean = [{k: v for k, v in m.items() if v is not None} for m in messages]
    try:
        prompt = tokenizer.apply_chat_template(clean[:-1], tools=tools, tokenize=False, add_generation_prompt=True)
        full = tokenizer.apply_chat_template(clean, tools=tools, tokenize=False)
    except Exception as exc:  # a template that cannot render these messages (jinja raises its own kinds)
        raise ExportError(f"the tokenizer's chat template cannot render a turn: {type(exc).__name__}: {exc}") from None
    if not full.startswith(prompt):
        raise ExportError(
            "the tokenizer's chat template does not render a turn's prompt as the start of the whole "
            "conversation: the assistant's tokens cannot be told apart"
        )
    encoded = tokenizer(full, add_special_tokens=False, return_offsets_mapping=True)
    cut = len(prompt)
    return {
        "input_ids": list(encoded["input_ids"]),
        "assistant_masks": [int(start >= cut) for start, _ in encoded["offset_mapping"]],
    }


def export_metadata(
    source: Source,
    env: Any,
    view: str,
    rows: list[dict[str, Any]],
    tokenizer: str | None,
    successful_only: bool,
    tools: Any,
) -> dict[str, Any]:
    """What ``metadata.json`` (and the dataset's description) records."""
    fields = env.unwrapped.spec_fields()
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "source": {"kind": source.kind, "path": str(source.path), "agent": source.agent},
        "env": {
            "id": source.env_id,
            "spec_hash": source.spec_hash,
            "protocol": source.protocol,
            "prompt": fields.get("prompt"),
            "split": source.split,
            "dataset": source.dataset,
            "horizon": fields.get("horizon"),
        },
        "view": view,
        "successful_only": successful_only,
        "tokenizer": tokenizer,
        "tools": tools,
        "episodes": len({(r["seed"], r["slot"], r["task_id"]) for r in rows}),
        "turns": len(rows),
        "skipped_error_episodes": source.skipped_errors,
    }


def _replace(tmp: Path, out: Path) -> None:
    """``tmp`` becomes ``out``; an ``out`` already there (``--overwrite``) is moved aside first and removed after."""
    aside = None
    if out.exists():
        aside = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
        os.rename(out, aside / "old")
    os.rename(tmp, out)
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


def write_export(
    rows: list[dict[str, Any]], metadata: dict[str, Any], out: str | Path, overwrite: bool = False
) -> Path:
    """The folder ``out``: ``train.parquet`` and ``metadata.json``, written in a temporary folder beside it and
    renamed at the end (nothing half-written is left at ``out``)."""
    from datasets import Dataset, DatasetInfo

    out = Path(out)
    if (out.exists() or out.is_symlink()) and not overwrite:
        raise ExportError(f"{out} exists (--overwrite replaces it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # a folder like any other, not mkdtemp's private one
        dataset = Dataset.from_list(rows, info=DatasetInfo(description=json.dumps(metadata)))
        dataset.to_parquet(str(tmp / "train.parquet"))
        (tmp / "metadata.json").write_text(json.dumps(metadata, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        _replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def load_export(path: str | Path) -> Any:
    """The exported dataset in folder ``path`` (in memory), its ``info.description`` the metadata's JSON."""
    import pyarrow.parquet as pq
    from datasets import Dataset, DatasetInfo
    from datasets.table import InMemoryTable

    folder = Path(path)
    metadata = (folder / "metadata.json").read_text(encoding="utf-8")
    return Dataset(InMemoryTable(pq.read_table(folder / "train.parquet")), info=DatasetInfo(description=metadata))
