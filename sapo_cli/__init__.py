"""The ``sapo-gym`` command line.

Each sub-command lives in its own module of this package with a ``register(subparsers)``
function; modules listed in ``COMMANDS`` that are present are loaded (lazily importing their
heavy dependencies inside the command itself).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

COMMANDS = (
    "envs",
    "env",
    "play",
    "evaluate",
    "data",
    "webshop",
    "train",
    "compare",
    "leaderboard",
    "submit",
    "export",
    "nemo_gym",
    "bundle",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sapo-gym", description="Multi-turn text envs for LLM agents, baselines and a leaderboard."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = f"sapo_cli.{name}"
        if importlib.util.find_spec(module) is not None:
            importlib.import_module(module).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:  # an optional package: say which extra installs it
        from sapo_gym.extras import MissingExtra, naming_extra

        named = naming_extra(exc, f"sapo-gym {args.command}")
        if not isinstance(named, MissingExtra):
            raise
        print(f"error: {named}", file=sys.stderr)
        return 2
