"""``--agent-*`` command-line flags for :class:`sapo_gym.bundle.AgentInfo` (help text = field docstrings)."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import typing

from sapo_gym.bundle import AgentInfo

__all__ = ["add_agent_arguments", "agent_info_from_args"]

_NOT_FLAGS = ("spec", "generation")
"""AgentInfo fields with no --agent-* flag: the spec is --agent, generation comes from the agent as it ran."""


def _field_docs(cls: type) -> dict[str, str]:
    """The string literal that follows each annotated field in the class body."""
    body = ast.parse(inspect.getsource(cls)).body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, nxt in zip(body, body[1:]):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(nxt, ast.Expr)
            and isinstance(getattr(nxt, "value", None), ast.Constant)
        ):
            docs[node.target.id] = str(nxt.value.value)  # type: ignore[union-attr]
    return docs


def add_agent_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--agent-name``, ``--agent-model``, ... (one per :class:`AgentInfo` field but ``spec`` and ``generation``)."""
    docs = _field_docs(AgentInfo)
    hints = typing.get_type_hints(AgentInfo)
    group = parser.add_argument_group("agent metadata (recorded in the result bundle)")
    for f in dataclasses.fields(AgentInfo):
        if f.name in _NOT_FLAGS:
            continue
        kind = int if int in typing.get_args(hints[f.name]) else str
        group.add_argument(
            f"--agent-{f.name.replace('_', '-')}",
            dest=f"agent_{f.name}",
            type=kind,
            default=None,
            help=docs.get(f.name, "") + (" (default: the --agent spec)" if f.name == "name" else ""),
        )


def agent_info_from_args(args: argparse.Namespace, spec: str) -> AgentInfo:
    values = {
        f.name: getattr(args, f"agent_{f.name}", None)
        for f in dataclasses.fields(AgentInfo)
        if f.name not in _NOT_FLAGS
    }
    values["name"] = values["name"] or spec
    return AgentInfo(spec=spec, **values)
