"""``sapo-gym export``: turn an episodes log or a result bundle into a Hugging Face ``datasets`` dataset.

SOURCE is an episodes log (``sapo-gym evaluate --out X`` writes ``X.episodes.jsonl``) or a result bundle. Every
episode is replayed in the env the file claims (its spec hash must be the env's built here) to read back each
turn's prompt and chat messages; OUT becomes a folder with ``train.parquet`` (one row per turn: ``messages``,
``prompt``, ``completion``, reward, return to go, the episode's outcome; with ``--tokenizer``, ``input_ids`` and
``assistant_masks``) and ``metadata.json`` (the env's id, spec hash, protocol, prompt, split). Load it with
``datasets.load_dataset("parquet", data_files="OUT/train.parquet")`` or :func:`sapo_cli.export_data.load_export`.
Nothing is written at OUT unless the whole export succeeds. docs/export.md.
"""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help=__doc__.splitlines()[0].partition(": ")[2],
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("source", metavar="SOURCE", help="an episodes log (JSONL) or a result bundle (JSON)")
    p.add_argument("out", metavar="OUT", help="the dataset folder to write (refused if it exists, unless --overwrite)")
    p.add_argument(
        "--view",
        default="chat",
        choices=("chat", "prompt"),
        help="chat (default): the env's info['messages'] then the reply as assistant | prompt: the env's prompt "
        "string as one user message then the reply (what the project's LLMAgent sees)",
    )
    p.add_argument(
        "--tokenizer",
        default=None,
        metavar="PATH",
        help="a tokenizer folder or tokenizer.json (e.g. agents/assets/sapo-tiny-tokenizer.json): adds input_ids "
        "and assistant_masks through its chat template",
    )
    p.add_argument("--successful-only", action="store_true", help="only the episodes that succeeded")
    p.add_argument("--data-dir", default=None, help="the env's dataset folder, when it needs one to be built here")
    p.add_argument("--overwrite", action="store_true", help="replace OUT when it exists (once the new one is whole)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from sapo_cli.export_data import export_metadata, load_tokenizer_for_export, replay_rows, tokenize_row, write_export
    from sapo_cli.export_read import ExportError, build_env, read_source

    out = Path(args.out)
    if (out.exists() or out.is_symlink()) and not args.overwrite:
        raise ExportError(f"{out} exists (--overwrite replaces it)")
    tokenizer = load_tokenizer_for_export(args.tokenizer) if args.tokenizer else None
    source = read_source(args.source)
    env = build_env(source, args.data_dir)
    try:
        rows = replay_rows(source, env, args.view, args.successful_only)
        tools = _tools(env, source)
        metadata = export_metadata(source, env, args.view, rows, args.tokenizer, args.successful_only, tools)
    finally:
        env.close()
    if tokenizer is not None:
        for row in rows:
            row.update(tokenize_row(tokenizer, row["messages"], tools if args.view == "chat" else None))
    write_export(rows, metadata, out, overwrite=args.overwrite)
    print(
        f"wrote {out}: {metadata['turns']} turns of {metadata['episodes']} episodes ({source.env_id}, spec "
        f"{source.spec_hash}, view {args.view}{', tokenized' if tokenizer is not None else ''})",
        file=sys.stderr,
    )
    return 0


def _tools(env: object, source: object) -> list | None:
    """The tool schema of a tool-call protocol (``info["tools"]``), else None."""
    action_format = getattr(getattr(getattr(env, "unwrapped", None), "protocol", None), "action_format", "text")
    if action_format != "tool-call":
        return None
    from sapo_gym.tools import tool_schema

    return tool_schema()
