"""Full WebShop at 1 k, 100 k and 1.18 M products: load, index, tagging, memory per env, search and step latency.

    OMP_NUM_THREADS=1 python benchmarks/webshop_scale.py [--sizes 1000,100000] [--data-root DIR] [--episodes 40]
        [--further 3] [--no-ray]

Each size's catalog is written once by :mod:`sapo_gym.webshop.synthetic` (WebShop's file schema, read with
``catalog="full"``: the path WebShop's own files take) under ``--data-root``. Every measurement runs in a fresh
child process, one at a time, so the memory numbers are that process's:

* ``cold``: an empty ``SAPO_GYM_CACHE``: the catalog load (the product store built), the BM25 index build and the
  noun tagging (spaCy, when installed), each timed (wall and CPU seconds, the tagging workers' included) with the
  process's peak RSS after it; then the first env (its RSS), ``--further`` envs more in the same process (RSS
  added per env), ``search()`` on the goals' instructions (p50 / p99, wall and CPU: on a loaded machine the CPU
  time is about what an unloaded core takes), ``env.step`` of oracle episodes (p50 / p99), and the bad inputs: a 10,000-word search, a 1 MB action (step time), 2,000 shop sessions opened and
  dropped and 2,000 env resets (the RSS each adds); and the RSS of a tagging worker (spawned as the tagging spawns
  them, 10,000 titles tagged);
* ``warm``: the same with the cache the cold child left: what every later process pays;
* ``async`` / ``ray``: ``--further`` envs in other processes (``sapo_gym.make_vec`` async, Ray actors), after
  60 steps of oracle episodes (searches, product pages, purchases): each process's RSS, USS (its own pages) and PSS, beside a process of the same kind that imported the same modules
  but built no env: the difference is what one more env adds. The cache is read with ``pread``: its pages are
  shared in the page cache and count in no env process's RSS.

Prints the CPU and two markdown tables, every number measured in this run on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.env_workers import cpu_line  # noqa: E402

SPLIT = "test"
BIG_QUERY_WORDS = 10_000
HUGE_ACTION_BYTES = 1 << 20
SESSIONS = 2_000
TAGGER_TITLES = 10_000
VEC_STEPS = 60


def _memory(pid: int | None = None) -> dict[str, float]:
    import psutil

    m = psutil.Process(pid).memory_full_info()
    return {"rss_mb": m.rss / 2**20, "uss_mb": m.uss / 2**20, "pss_mb": m.pss / 2**20}


def _rss_mb() -> float:
    return _memory()["rss_mb"]


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


def _cpu_s() -> float:
    """CPU seconds of this process and its waited-for children (the tagging workers)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _pct(values: list[float], q: float) -> float:
    import numpy as np

    return float(np.percentile(values, q) * 1e3) if values else float("nan")


def _timed(fn: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def _make(data: str) -> Any:
    import gymnasium as gym

    import sapo_gym  # noqa: F401  (registers the ids)

    env = gym.make("sapo/WebShop-v0", data_dir=data, catalog="full", split=SPLIT)
    env.reset(options={"task_index": 0})
    return env


def _phases(data: str) -> dict[str, float]:
    from sapo_gym.webshop.dataset import load_split_catalog
    from sapo_gym.webshop.noun_table import catalog_noun_rule
    from sapo_gym.webshop.search import shared_index

    out: dict[str, float] = {}

    def phase(name: str, fn: Any) -> Any:
        cpu = _cpu_s()
        value, out[f"{name}_s"] = _timed(fn)
        out[f"{name}_cpu_s"], out[f"{name}_peak_mb"] = _cpu_s() - cpu, _peak_mb()
        return value

    catalog = phase("catalog", lambda: load_split_catalog(SPLIT, data, catalog="full"))
    phase("index", lambda: shared_index(catalog))
    phase("nouns", lambda: catalog_noun_rule(catalog))
    out["goals"] = len(catalog.goals)
    return out


def _latencies(env: Any, episodes: int) -> dict[str, float]:
    from agents.base import format_action
    from sapo_gym.webshop.search import shared_index

    base = env.unwrapped
    index = shared_index(base.catalog)
    searches, search_cpu = [], []
    for i in range(min(len(base.task_ids), 200)):
        query = base.goal(i).instruction_text.split(", and price lower than")[0]
        cpu = time.process_time()
        searches.append(_timed(lambda q=query: index.search(q))[1])
        search_cpu.append(time.process_time() - cpu)
    steps = []
    for i in range(episodes):
        _, info = env.reset(options={"task_index": i % len(base.task_ids)})
        for _ in range(15):
            (_, _, terminated, truncated, info), dt = _timed(lambda a=info["expert_action"]: env.step(format_action(a)))
            steps.append(dt)
            if terminated or truncated:
                break
    return {
        "search_p50_ms": _pct(searches, 50),
        "search_p99_ms": _pct(searches, 99),
        "search_cpu_p50_ms": _pct(search_cpu, 50),
        "search_cpu_p99_ms": _pct(search_cpu, 99),
        "step_p50_ms": _pct(steps, 50),
        "step_p99_ms": _pct(steps, 99),
        "steps": len(steps),
    }


def _bad_inputs(env: Any) -> dict[str, float]:
    """A 10,000-word search and a 1 MB action (their step time), then sessions and resets opened and dropped."""
    from agents.base import format_action
    from sapo_gym.webshop.app import ShopState
    from sapo_gym.webshop.search import shared_index

    base = env.unwrapped
    env.reset(options={"task_index": 0})
    words = " ".join(f"word{i % 977}" for i in range(BIG_QUERY_WORDS))
    _, big_search_s = _timed(lambda: env.step(format_action(f"search[{words}]")))
    _, huge_action_s = _timed(lambda: env.step("x" * HUGE_ACTION_BYTES))
    state = ShopState(base.catalog, shared_index(base.catalog), range(len(base.task_ids)), base.nouns)
    before = _rss_mb()
    for i in range(SESSIONS):
        sid = state.start(i % len(base.task_ids))
        state.act(sid, f"search[{base.goal(i % len(base.task_ids)).query}]")
    sessions_mb = _rss_mb() - before
    before = _rss_mb()
    for i in range(SESSIONS):
        env.reset(options={"task_index": i % len(base.task_ids)})
    return {
        "big_search_ms": big_search_s * 1e3,
        "huge_action_ms": huge_action_s * 1e3,
        "sessions_added_mb": sessions_mb,
        "sessions_held": len(state.sessions),
        "resets_added_mb": _rss_mb() - before,
    }


def _tagger_rss_mb(titles: list[str]) -> float:
    """In a spawned process (as a tagging worker runs): spaCy's nouns of ``titles``, then that process's RSS (not its
    peak: Linux carries the peak across the exec from the forked parent)."""
    from sapo_gym.webshop.nouns import spacy_model_package, spacy_nouns_batch

    spacy_nouns_batch(titles, spacy_model_package() or "")
    return _rss_mb()


def _tagger(data: str) -> float | None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from sapo_gym.webshop import nouns
    from sapo_gym.webshop.dataset import load_split_catalog

    if nouns.spacy_model_package() is None or not hasattr(nouns, "spacy_nouns_batch"):
        return None  # no spaCy, or a sapo_gym from before batch tagging (a baseline run)
    titles = [p.title for p, _ in zip(load_split_catalog(SPLIT, data, catalog="full").products, range(TAGGER_TITLES))]
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_tagger_rss_mb, titles).result()


def child_single(data: str, further: int, episodes: int, cold: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"rss_start_mb": _rss_mb()}
    out.update(_phases(data))
    env, out["env_s"] = _timed(lambda: _make(data))
    out["rss_first_env_mb"] = _rss_mb()
    more = [_make(data) for _ in range(further)]
    out["rss_per_further_env_mb"] = (_rss_mb() - out["rss_first_env_mb"]) / max(further, 1)
    out.update(_latencies(env, episodes))
    out.update(_bad_inputs(env))
    for e in [env, *more]:
        e.close()
    out["peak_rss_mb"] = _peak_mb()
    if cold:
        out["tagger_rss_mb"] = _tagger(data)
    return out


def _ray_baseline() -> int:
    import ray

    @ray.remote(num_cpus=0.2)
    class Idle:
        def __init__(self) -> None:
            import sapo_gym.webshop.env  # noqa: F401  (the modules an env worker imports, no env)

        def pid(self) -> int:
            return os.getpid()

    return ray.get(Idle.remote().pid.remote())


def _idle_worker(conn: Any) -> None:
    import gymnasium  # noqa: F401

    import sapo_gym.webshop.env  # noqa: F401

    conn.send(os.getpid())
    conn.recv()


def _baseline(vectorization: str) -> dict[str, float]:
    """A process of the vector env's kind that imported the env's modules and built no env."""
    if vectorization == "ray":
        return _memory(_ray_baseline())
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_idle_worker, args=(child,))
    proc.start()
    try:
        return _memory(parent.recv())
    finally:
        parent.send("stop")
        proc.join()


def _expert_actions(infos: dict[str, Any], n: int) -> list[str]:
    from agents.base import format_action

    has = infos.get("_expert_action", [False] * n)
    return [format_action(infos["expert_action"][i] if has[i] else "click[back to search]") for i in range(n)]


def child_processes(data: str, further: int, vectorization: str) -> dict[str, Any]:
    import sapo_gym

    if vectorization == "ray":
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=80 * 2**20)
    try:
        idle = _baseline(vectorization)
        vec, start_s = _timed(
            lambda: sapo_gym.make_vec(
                "sapo/WebShop-v0", further, vectorization=vectorization, data_dir=data, catalog="full", split=SPLIT
            )
        )
        try:
            _, infos = vec.reset(seed=0)
            for _ in range(VEC_STEPS):  # the oracle's episodes: every worker searches and opens products
                _, _, _, _, infos = vec.step(_expert_actions(infos, further))
            pids = [w.pid for w in vec.describe()] if vectorization == "ray" else [p.pid for p in vec.processes]
            envs = [_memory(p) for p in pids]
        finally:
            vec.close()
    finally:
        if vectorization == "ray":
            import ray

            ray.shutdown()
    worst = {k: max(e[k] for e in envs) for k in envs[0]}
    return {
        "start_s": start_s,
        "processes": len(pids),
        **worst,
        **{f"idle_{k}": v for k, v in idle.items()},
        **{f"added_{k}": worst[k] - idle[k] for k in worst},
    }


def _child(mode: str, data: str, cache: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        mode,
        "--data",
        data,
        "--further",
        str(args.further),
        "--episodes",
        str(args.episodes),
    ]
    env = {**os.environ, "SAPO_GYM_CACHE": cache, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ensure_catalog(root: Path, n: int) -> tuple[str, float]:
    """The folder of the ``n``-product synthetic catalog (written now if missing) and the seconds writing took."""
    folder = root / f"synthetic-{n}"
    if (folder / "items_shuffle.json").is_file():
        return str(folder), 0.0
    from sapo_gym.webshop.synthetic import write_catalog

    _, seconds = _timed(lambda: write_catalog(folder, n))
    return str(folder), seconds


def measure_size(root: Path, n: int, args: argparse.Namespace) -> dict[str, Any]:
    data, write_s = ensure_catalog(root, n)
    row: dict[str, Any] = {
        "products": n,
        "write_s": write_s,
        "file_mb": sum(f.stat().st_size for f in Path(data).glob("items_*.json")) / 2**20,
    }
    with tempfile.TemporaryDirectory(prefix="webshop-scale-cache-", dir=args.cache_root) as fresh:
        cache = str(Path(args.keep_cache) / f"synthetic-{n}") if args.keep_cache else fresh
        for mode in args.modes.split(","):
            if mode != "ray" or not args.no_ray:
                row[mode] = _child(mode, data, cache, args)
                print(f"  {n:>9,} {mode}: {json.dumps(row[mode])}", flush=True)
    return row


def _f(value: Any, fmt: str) -> str:
    return format(value, fmt) if isinstance(value, (int, float)) else "–"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def tables(rows: list[dict[str, Any]]) -> str:
    build = [
        "products",
        "files",
        "catalog load cold / warm",
        "index build / load",
        "tagging cold (CPU) / warm",
        "peak RSS cold: catalog / index / tagging",
        "tagging worker RSS",
        "first env RSS warm",
        "+ env in process",
        "+ env async: RSS / USS (idle process)",
        "+ env Ray: RSS / USS (idle actor)",
    ]
    lines = [_row(build), _row(["---:"] * len(build))]
    for r in rows:
        c, w, a, y = r.get("cold", {}), r.get("warm", {}), r.get("async", {}), r.get("ray", {})
        lines.append(
            _row(
                [
                    f"{r['products']:,}",
                    f"{_f(r['file_mb'], ',.0f')} MB",
                    f"{_f(c.get('catalog_s'), '.2f')} / {_f(w.get('catalog_s'), '.2f')} s",
                    f"{_f(c.get('index_s'), '.1f')} / {_f(w.get('index_s'), '.3f')} s",
                    f"{_f(c.get('nouns_s'), '.1f')} s ({_f(c.get('nouns_cpu_s'), '.0f')} CPU-s) / {_f(w.get('nouns_s'), '.3f')} s",
                    f"{_f(c.get('catalog_peak_mb'), ',.0f')} / {_f(c.get('index_peak_mb'), ',.0f')} / "
                    f"{_f(c.get('nouns_peak_mb'), ',.0f')} MB",
                    f"{_f(c.get('tagger_rss_mb'), ',.0f')} MB",
                    f"{_f(w.get('rss_first_env_mb'), ',.0f')} MB",
                    f"{_f(w.get('rss_per_further_env_mb'), '.2f')} MB",
                    f"{_f(a.get('rss_mb'), ',.0f')} / {_f(a.get('uss_mb'), ',.0f')} MB ({_f(a.get('idle_rss_mb'), ',.0f')} / "
                    f"{_f(a.get('idle_uss_mb'), ',.0f')})",
                    f"{_f(y.get('rss_mb'), ',.0f')} / {_f(y.get('uss_mb'), ',.0f')} MB ({_f(y.get('idle_rss_mb'), ',.0f')} / "
                    f"{_f(y.get('idle_uss_mb'), ',.0f')})",
                ]
            )
        )
    speed = [
        "products",
        "search p50 / p99 (CPU p50 / p99)",
        "step p50 / p99",
        "10k-word search step",
        "1 MB action step",
        "2k sessions opened / 2k resets: RSS added",
    ]
    lines += ["", _row(speed), _row(["---:"] * len(speed))]
    for r in rows:
        w = r.get("warm", {})
        lines.append(
            _row(
                [
                    f"{r['products']:,}",
                    f"{_f(w.get('search_p50_ms'), '.2f')} / {_f(w.get('search_p99_ms'), '.2f')} ms "
                    f"({_f(w.get('search_cpu_p50_ms'), '.2f')} / {_f(w.get('search_cpu_p99_ms'), '.2f')})",
                    f"{_f(w.get('step_p50_ms'), '.2f')} / {_f(w.get('step_p99_ms'), '.2f')} ms",
                    f"{_f(w.get('big_search_ms'), '.2f')} ms",
                    f"{_f(w.get('huge_action_ms'), '.2f')} ms",
                    f"{_f(w.get('sessions_added_mb'), '.1f')} / {_f(w.get('resets_added_mb'), '.1f')} MB",
                ]
            )
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,100000", help="catalog sizes (products), comma-separated")
    parser.add_argument("--data-root", default=str(Path(tempfile.gettempdir()) / "sapo-webshop-synthetic"))
    parser.add_argument(
        "--cache-root", default=None, help="where the children's fresh caches go (default: the temp dir)"
    )
    parser.add_argument(
        "--keep-cache",
        default=None,
        metavar="DIR",
        help="use (and keep) DIR/synthetic-N as the cache instead of a fresh one: a later run with "
        "--modes warm,async,ray measures on it without building again",
    )
    parser.add_argument("--modes", default="cold,warm,async,ray", help="children to run, in order")
    parser.add_argument("--episodes", type=int, default=40, help="oracle episodes timed per size")
    parser.add_argument("--further", type=int, default=3, help="envs after the first (in process, async, Ray)")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray actors")
    parser.add_argument("--timeout", type=float, default=7200.0, help="seconds per child")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--data", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        single = args.child in ("cold", "warm")
        out = (
            child_single(args.data, args.further, args.episodes, args.child == "cold")
            if single
            else child_processes(args.data, args.further, args.child)
        )
        print(json.dumps(out))
        return
    print(cpu_line(), flush=True)
    rows = [measure_size(Path(args.data_root), int(n), args) for n in args.sizes.split(",")]
    print(tables(rows))


if __name__ == "__main__":
    main()
