"""Differential fuzzing of the compiled ALFWorld engine against the reference, with a coverage report.

    python benchmarks/alfworld_fuzz.py --data ../shared/data/alfworld --out fuzz_report.md

1. Checks that the reference speed-ups (memoized parses and translations) preserve its output: the
   instrumented reference replays golden traces recorded without them, byte for byte.
2. Fuzzes every valid game and a hash sample of the train tarball: both engines side by side, every
   observation / admissible list / won flag compared (see ``benchmarks.alfworld_verification.fuzz``).
3. Reports which grammar branches the reference derived, and lists the unreachable ones with reasons.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: benchmarks.* from the repository root

from benchmarks.alfworld_verification.coverage import coverage_table, grammar_branches  # noqa: E402
from benchmarks.alfworld_verification.fuzz import GameReport, extract_games, fuzz_game, generated_games  # noqa: E402
from benchmarks.alfworld_verification.golden import load_golden, replay  # noqa: E402
from benchmarks.alfworld_verification.refcache import instrumented_reference  # noqa: E402
from sapo_gym.alfworld.engines import ReferenceEngine, engine_versions  # noqa: E402


@dataclass
class FuzzConfig:
    data: str = field(
        default="../shared/data/alfworld",
        metadata={"help": "ALFWorld data root (json_2.1.1/, golden/, the train tarball)"},
    )
    valid_games: int = field(default=274, metadata={"help": "how many valid games to fuzz (all 274 by default)"})
    train_fraction: float = field(default=0.02, metadata={"help": "hash-sampled fraction of the train tarball to fuzz"})
    generated_games: int = field(default=20, metadata={"help": "games of the embedded generated set to fuzz"})
    steps: int = field(default=40, metadata={"help": "commands per game after the reset"})
    golden_games: int = field(
        default=30, metadata={"help": "golden traces replayed through the instrumented reference"}
    )
    seed: int = field(default=0, metadata={"help": "fuzzing seed"})
    out: str = field(default="", metadata={"help": "write the markdown report here (default: stdout)"})


def parse_args(argv: list[str] | None = None) -> FuzzConfig:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in dataclasses.fields(FuzzConfig):
        parser.add_argument(
            "--" + f.name.replace("_", "-"), type=type(f.default), default=f.default, help=f.metadata["help"]
        )
    return FuzzConfig(**vars(parser.parse_args(argv)))


def check_golden(cfg: FuzzConfig) -> list[str]:
    traces = list(load_golden(cfg.data))[: cfg.golden_games]
    lines, compared, bad = [], 0, 0
    for trace in tqdm(traces, desc="golden via instrumented reference"):
        n, mismatch = replay(ReferenceEngine(trace.game_file(cfg.data)), trace)
        compared += n
        if mismatch is not None:
            bad += 1
            lines.append(f"- MISMATCH {trace.game}: {mismatch}")
    return [
        f"Instrumented reference vs golden traces: {len(traces)} games, {compared} states, {bad} mismatching games.",
        *lines,
    ]


def fuzz(cfg: FuzzConfig, games: list[str], label: str) -> list[GameReport]:
    return [fuzz_game(g, cfg.steps, cfg.seed) for g in tqdm(games, desc=f"fuzz {label}")]


def summarize(label: str, reports: list[GameReport]) -> list[str]:
    steps = sum(r.steps for r in reports)
    bad = [r for r in reports if r.mismatch is not None]
    verbs: Counter = sum((r.verbs for r in reports), Counter())
    ref_s, comp_s = sum(r.reference_s for r in reports), sum(r.compiled_s for r in reports)
    lines = [
        f"### {label}: {len(reports)} games, {steps} commands, {len(bad)} games with a mismatch",
        f"Time inside the engines (load + reset + steps): reference {ref_s:.1f} s, compiled {comp_s:.2f} s.",
        "Commands played: " + ", ".join(f"{v} {n}" for v, n in verbs.most_common()),
    ]
    lines += [f"- MISMATCH {r.game}: {r.mismatch}" for r in bad]
    return lines


def coverage_lines(branches: list[tuple[str, int, str]], hits: Counter) -> list[str]:
    table = coverage_table(branches, hits)
    hit = [b for b in table if b.hits]
    unreachable = [b for b in table if not b.hits and b.unreachable]
    missing = [b for b in table if not b.hits and not b.unreachable]
    lines = [
        f"## Grammar rule coverage: {len(hit)} of {len(table)} branches derived, "
        f"{len(unreachable)} unreachable, {len(missing)} reachable but not covered",
        "",
        "| rule | branch | condition | derivations |",
        "|---|---|---|---|",
    ]
    lines += [f"| {b.rule} | {b.index} | `{b.condition}` | {b.hits} |" for b in hit]
    lines += ["", "Unreachable (never derived, and no state can derive them):", ""]
    lines += [f"- {b.rule}[{b.index}] `{b.condition}`: {b.unreachable}" for b in unreachable]
    if missing:
        lines += ["", "Reachable but not covered by this run:", ""]
        lines += [f"- {b.rule}[{b.index}] `{b.condition}`" for b in missing]
    unexpected = [b for b in table if b.hits and b.unreachable]
    lines += [f"- WARNING: {b.rule}[{b.index}] was derived but is listed unreachable" for b in unexpected]
    return lines


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(argv)
    start = time.perf_counter()
    valid = sorted(glob.glob(os.path.join(cfg.data, "json_2.1.1", "valid_*", "*", "*", "game.tw-pddl")))[
        : cfg.valid_games
    ]
    report = ["# ALFWorld compiled-engine fuzz report", "", f"Config: `{cfg}`; versions: {engine_versions()}", ""]
    with instrumented_reference() as hits, tempfile.TemporaryDirectory() as tmp:
        report += check_golden(cfg) + [""]
        hits.clear()  # coverage counts the fuzzing only
        train = extract_games(os.path.join(cfg.data, "json_2.1.1-train.tar.xz"), tmp, cfg.train_fraction, cfg.seed)
        generated = generated_games(tmp, cfg.generated_games) if cfg.generated_games else []
        valid_reports, train_reports = fuzz(cfg, valid, "valid"), fuzz(cfg, train, "train sample")
        generated_reports = fuzz(cfg, generated, "generated")
        branches = grammar_branches(ReferenceEngine((valid + train + generated)[0]))
    report += ["## Differential fuzzing", ""] + summarize("valid_seen + valid_unseen", valid_reports) + [""]
    report += summarize("train sample", train_reports) + [""]
    report += summarize("embedded generated set", generated_reports) + [""] + coverage_lines(branches, hits)
    report += ["", f"Wall time: {time.perf_counter() - start:.0f} s."]
    text = "\n".join(report) + "\n"
    if cfg.out:
        with open(cfg.out, "w") as f:
            f.write(text)
    sys.stdout.write(text)
    failed = any(r.mismatch for r in valid_reports + train_reports + generated_reports) or any(
        "MISMATCH" in line for line in report
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
