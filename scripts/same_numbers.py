"""Compare two `sapo-gym compare` output folders: every number except wall-clock times, bit for bit.

    python scripts/same_numbers.py REF_DIR NEW_DIR

Reads every results.json, result.json, state.json, bundle and metrics.jsonl under REF_DIR and the same
file under NEW_DIR, and lists each value that differs. Ignored: timings (``time/*``, ``*_s``,
``iteration_seconds``, ``phase_seconds``), paths and commands (they name the folders), creation
dates, the environment block, the fingerprint and config echo (a refactor may rename config
fields), and the order in which parallel runs finished. Exit status 1 when anything differs.
"""

import json
import sys
from pathlib import Path


def scrub(x, path=""):
    if isinstance(x, dict):
        return {
            k: scrub(v, f"{path}/{k}")
            for k, v in x.items()
            if not (
                k.startswith("time/")
                or k.endswith("_s")
                or k
                in (
                    "fingerprint",
                    "environment",
                    "config",
                    "bundle",
                    "phase_seconds",
                    "path",
                    "created",
                    "agent",
                    "command",
                    "bundles",
                    "iteration_seconds",
                )
            )
        }
    if isinstance(x, list):
        items = [scrub(v, path) for v in x]
        return sorted(items) if path.endswith("/finished") else items  # runs finish in either order with 2 workers
    return x


def diff(a, b, path, out):
    if type(a) is not type(b):
        out.append(f"{path}: type {type(a).__name__} vs {type(b).__name__}")
        return
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}/{k}: only in {'new' if k not in a else 'ref'}")
            else:
                diff(a[k], b[k], f"{path}/{k}", out)
    elif isinstance(a, list):
        if len(a) != len(b):
            out.append(f"{path}: len {len(a)} vs {len(b)}")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path}: {a!r} vs {b!r}")


ref, new = Path(sys.argv[1]), Path(sys.argv[2])
out, n = [], 0
for f in sorted(ref.rglob("*.json")) + sorted(ref.rglob("metrics.jsonl")):
    rel = f.relative_to(ref)
    g = new / rel
    if not g.exists():
        out.append(f"{rel}: missing in new")
        continue
    if f.suffix == ".jsonl":
        a = [json.loads(line) for line in f.read_text().splitlines()]
        b = [json.loads(line) for line in g.read_text().splitlines()]
    else:
        a, b = json.loads(f.read_text()), json.loads(g.read_text())
    diff(scrub(a), scrub(b), str(rel), out)
    n += 1
print(f"compared {n} files under {ref} and {new}: {len(out)} differences")
for line in out[:60]:
    print("  ", line)
sys.exit(1 if out else 0)
