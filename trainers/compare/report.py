"""The comparison's results: ``results.json`` (every number) and ``results.md`` (the tables).

``results.json`` fields (all success/score values are fractions in [0, 1] / the env's score):

* ``env``, ``eval_split``, ``eval_seeds``, ``seeds``, ``algos``, ``fingerprint``, ``config``
  (the :class:`~trainers.compare.config.CompareConfig`, flat: :meth:`~trainers.compare.config.CompareConfig.as_dict`), ``complete`` (every run finished);
* ``warm_start``: ``summary`` (per category and ``all``: episodes, success, Wilson CI, score, steps,
  invalid_rate, as :func:`sapo_gym.evaluation.summarize`), ``eval_seeds`` (the runs' seeds, or more:
  ``warm_start_eval_seeds``), ``sft_loss``, ``train_s``, ``bundle``;
* ``methods.<algo>``: ``seeds``; ``overall`` and ``categories.<category>``, each with ``success`` and
  ``score`` as ``{mean, ci_low, ci_high, values}`` over seeds (95 % Student-t; null with one seed);
  ``lift`` (``baseline``, ``after``, ``gain``, ``gain_ci_low``/``gain_ci_high`` (seed spread plus the
  evaluation noise of both sides), ``verdict``: lifted / lowered / no detectable change)
  and ``lift_line`` (the sentence in results.md); ``phase_seconds`` (mean seconds per iteration of
  each of the paper's eight phases, over iterations and seeds); ``iteration_seconds``;
  ``curves`` (``iteration`` and per-seed ``rollout_success``, ``value_explained_var``, ``env_steps`` (turns
  played), ``nonzero_advantage_turns`` and ``equal_return_groups`` (group methods; else null) lists; ``held_out_iteration`` and per-seed
  ``held_out_success``: the first evaluation seed's success at the warm start, every ``eval_every``
  iterations and at the end); ``bundles``; ``per_seed`` summaries;
  ``collapses`` (per seed: None, or the sentence of :func:`~trainers.compare.stats.collapse`);
  ``held_out_values`` (with ``value_episodes``: each score of :func:`trainers.held_out_values.held_out_values` over
  seeds, else null); ``run_seconds`` (training, evaluation and that scoring, mean per run);
* ``environment``: package versions, thread settings, the CPU's features and torch's kernel capability
  (:func:`trainers.hardware.run_environment`): what can make two machines' numbers differ.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainers.compare.config import CompareConfig, label
from trainers.compare.runner import RunResult
from trainers.compare.stats import collapse, lift_over, seed_stat, seeds_to_resolve, welch_difference
from trainers.hardware import run_environment
from trainers.profiling import PHASES

__all__ = ["build_results", "render_markdown", "write_report"]


def _categories(runs: Sequence[RunResult], start: RunResult) -> list[str]:
    names = {c for r in [start, *runs] for c in r.summary if c != "all"}
    return sorted(names)


def _held_out_curves(runs: list[RunResult], start: RunResult) -> dict[str, Any]:
    """``held_out_iteration`` (iterations done: 0 = the warm start, then every ``eval_every``, then the
    last) and per-seed ``held_out_success`` on the first evaluation seed; {} for runs without them."""
    first = start.extra.get("first_seed_success")
    if first is None or any("first_seed_success" not in r.extra for r in runs):
        return {}
    points = [[(row["iteration"] + 1, row["eval/success"]) for row in r.metrics if "eval/success" in row] for r in runs]
    return {
        "held_out_iteration": [0, *(i for i, _ in points[0]), len(runs[0].metrics)],
        "held_out_success": [[first, *(v for _, v in p), r.extra["first_seed_success"]] for p, r in zip(points, runs)],
    }


def _second_half_mean(rows: list[dict[str, Any]], key: str) -> float | None:
    """Mean of ``key`` over the second half of a run's iterations (None: never logged there)."""
    values = [row[key] for row in rows[len(rows) // 2 :] if row.get(key) is not None]
    return sum(values) / len(values) if values else None


def _run_mean(runs: list[RunResult], key: str) -> float | None:
    """Mean of ``key`` over every iteration of every run (None: never logged)."""
    values = [row[key] for r in runs for row in r.metrics if row.get(key) is not None]
    return sum(values) / len(values) if values else None


def _machinery(runs: list[RunResult]) -> dict[str, Any]:
    """What the method's machinery did: V's explained variance (second half of training, per seed), the share of
    turns with a non-zero advantage and, for the group methods, of groups whose returns were all equal."""
    ev = [_second_half_mean(r.metrics, "value/explained_var") for r in runs]
    mc = [_second_half_mean(r.metrics, "value/explained_var_mc") for r in runs]
    return {
        "value_explained_var": seed_stat(ev).to_dict() if all(v is not None for v in ev) else None,
        "value_explained_var_mc": seed_stat(mc).to_dict() if all(v is not None for v in mc) else None,
        "nonzero_advantage_turns": _run_mean(runs, "advantage/nonzero_turns"),
        "equal_return_groups": _run_mean(runs, "advantage/equal_return_groups"),
    }


def _held_out_values(runs: list[RunResult]) -> dict[str, Any] | None:
    """Each held-out value score (:func:`trainers.held_out_values.held_out_values`) over seeds, as ``seed_stat``
    dicts; None unless every run has them (``value_episodes``)."""
    scores = [r.extra.get("held_out_values") for r in runs]
    if not scores or any(s is None for s in scores):
        return None
    return {key: seed_stat([s[key] for s in scores]).to_dict() for key in scores[0] if all(key in s for s in scores)}


def _method(
    algo: str, runs: list[RunResult], start: RunResult, categories: list[str], start_name: str
) -> dict[str, Any]:
    def stat(cat: str, key: str) -> dict[str, Any]:
        return seed_stat([r.summary.get(cat, {}).get(key, 0.0) for r in runs]).to_dict()

    episodes = int(min(r.summary["all"].get("episodes", 0) for r in runs))
    lift = lift_over(
        start.summary["all"]["success"],
        [r.summary["all"]["success"] for r in runs],
        episodes=episodes,
        baseline_episodes=int(start.summary["all"].get("episodes", 0)),
    )
    rows = [row for r in runs for row in r.metrics]
    phases = {p: sum(row.get(f"time/{p}", 0.0) for row in rows) / max(len(rows), 1) for p in PHASES}
    return {
        "seeds": [r.seed for r in runs],
        "overall": {"success": stat("all", "success"), "score": stat("all", "score")},
        "categories": {c: {"success": stat(c, "success"), "score": stat(c, "score")} for c in categories},
        "lift": lift.to_dict(),
        "lift_line": lift.line(label(algo), start_name),
        "machinery": _machinery(runs),
        "held_out_values": _held_out_values(runs),
        "run_seconds": sum(r.train_s + r.eval_s + r.extra.get("held_out_values_s", 0.0) for r in runs) / len(runs),
        "phase_seconds": phases,
        "iteration_seconds": sum(phases.values()),
        "curves": {
            "iteration": [row["iteration"] for row in runs[0].metrics],
            "rollout_success": [[row.get("rollout/success") for row in r.metrics] for r in runs],
            "value_explained_var": [[row.get("value/explained_var") for row in r.metrics] for r in runs],
            "env_steps": [[row.get("rollout/turns") for row in r.metrics] for r in runs],
            "nonzero_advantage_turns": [[row.get("advantage/nonzero_turns") for row in r.metrics] for r in runs],
            "equal_return_groups": [[row.get("advantage/equal_return_groups") for row in r.metrics] for r in runs],
            **_held_out_curves(runs, start),
        },
        "bundles": [r.bundle for r in runs],
        "per_seed": {str(r.seed): r.summary for r in runs},
        # an iteration whose episodes were all lost with their env workers has no rollout metrics: None
        "collapses": {
            str(r.seed): collapse(
                [row.get("rollout/invalid_rate") for row in r.metrics],
                [row.get("rollout/success") for row in r.metrics],
            )
            for r in runs
        },
    }


def build_results(cfg: CompareConfig, start: RunResult, runs: Sequence[RunResult], complete: bool) -> dict[str, Any]:
    """Everything ``results.json`` holds (see the module docstring)."""
    categories = _categories(runs, start)
    start_name = "behaviour-cloning warm start" if cfg.train.sft_episodes else "base model"
    methods = {}
    for algo in cfg.algo_list:
        mine = sorted((r for r in runs if r.algo == algo), key=lambda r: r.seed or 0)
        if mine:
            methods[algo] = _method(algo, mine, start, categories, start_name)
    return {
        "env": cfg.train.env,
        "eval_split": cfg.resolved_eval_split,
        "eval_seeds": cfg.eval_seed_list,
        "seeds": cfg.seed_list,
        "algos": cfg.algo_list,
        "fingerprint": cfg.fingerprint(),
        "complete": complete,
        "config": cfg.as_dict(),
        "start_name": start_name,
        "categories": categories,
        "warm_start": {
            "summary": start.summary,
            "eval_seeds": cfg.warm_start_seed_list,
            "sft_loss": start.extra.get("sft_loss", []),
            "train_s": start.train_s,
            "bundle": start.bundle,
        },
        "methods": methods,
        "environment": run_environment(),
    }


def _cell(stat: dict[str, Any], pct: bool = True) -> str:
    scale, digits = (100.0, 1) if pct else (1.0, 3)
    text = f"{stat['mean'] * scale:.{digits}f}"
    if stat["ci_high"] is not None:
        text += f" ± {(stat['ci_high'] - stat['mean']) * scale:.{digits}f}"
    return text


def _table(res: dict[str, Any]) -> list[str]:
    cats = res["categories"]
    head = ["method", "seeds", "success % (all)", "score (all)", *[f"{c} %" for c in cats]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    ws = res["warm_start"]["summary"]
    start = [
        res["start_name"],
        "—",
        f"{100 * ws['all']['success']:.1f}",
        f"{ws['all']['score']:.3f}",
        *[f"{100 * ws[c]['success']:.1f}" if c in ws else "—" for c in cats],
    ]
    lines.append("| " + " | ".join(start) + " |")
    for algo, m in res["methods"].items():
        row = [
            label(algo),
            str(len(m["seeds"])),
            _cell(m["overall"]["success"]),
            _cell(m["overall"]["score"], pct=False),
            *[_cell(m["categories"][c]["success"]) for c in cats],
        ]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _score_table(res: dict[str, Any]) -> list[str]:
    """Mean score per category (shown when scores carry more than success, e.g. WebShop's partial credit)."""
    cats = [*res["categories"], "all"]
    ws = res["warm_start"]["summary"]
    lines = [
        "| " + " | ".join(["method", *cats]) + " |",
        "|" + "---|" * (len(cats) + 1),
        "| " + " | ".join([res["start_name"], *[f"{ws[c]['score']:.3f}" if c in ws else "—" for c in cats]]) + " |",
    ]
    for algo, m in res["methods"].items():
        stats = [m["overall"]["score"] if c == "all" else m["categories"][c]["score"] for c in cats]
        lines.append("| " + " | ".join([label(algo), *[_cell(st, pct=False) for st in stats]]) + " |")
    return lines


def _partial_scores(res: dict[str, Any]) -> bool:
    """Do scores differ from success anywhere (partial credit), so a score table says something?"""
    summaries = [res["warm_start"]["summary"], *[s for m in res["methods"].values() for s in m["per_seed"].values()]]
    return any(abs(row["score"] - row["success"]) > 1e-9 for s in summaries for row in s.values())


def _held_out_table(res: dict[str, Any]) -> list[str]:
    """Held-out success (first evaluation seed) after 0, eval_every, ... iterations: mean over seeds per method."""
    curves = {algo: m["curves"] for algo, m in res["methods"].items() if "held_out_success" in m["curves"]}
    if not curves:
        return []
    its = next(iter(curves.values()))["held_out_iteration"]
    lines = [
        f"## Held-out success during training (eval seed {res['eval_seeds'][0]}; mean over seeds, %)",
        "",
        "| method | " + " | ".join(f"it {i}" for i in its) + " |",
        "|" + "---|" * (len(its) + 1),
    ]
    for algo, c in curves.items():
        means = [sum(col) / len(col) for col in zip(*c["held_out_success"])]
        lines.append(f"| {label(algo)} | " + " | ".join(f"{100 * v:.1f}" for v in means) + " |")
    return [*lines, ""]


def _machinery_table(res: dict[str, Any]) -> list[str]:
    """Per method: success with its interval, V's explained variance, non-zero advantages, all-equal groups."""
    lines = [
        "## What each method's machinery did",
        "",
        "V explained variance: of each iteration's new episodes, by V_old before the update, mean over the second "
        "half of training per seed (mean ± 95 % CI over seeds; seeds in brackets), of the GAE targets (λ-returns, "
        "which hold V_old's own bootstrap) and of the Monte-Carlo discounted returns. Non-zero "
        "advantages: share of training turns whose advantage is not exactly 0. Equal groups: share of task "
        "groups whose G rollouts all had the same return (a group method learns nothing from them).",
        "",
        "| method | success % (95 % CI) | V explained variance (GAE targets) | V explained variance (Monte-Carlo returns) "
        "| turns with a non-zero advantage | groups with all-equal returns |",
        "|---|---|---|---|---|---|",
    ]

    def pct(v: float | None) -> str:
        return "—" if v is None else f"{100 * v:.1f} %"

    for algo, m in res["methods"].items():
        st = m["overall"]["success"]
        ci = "" if st["ci_low"] is None else f" [{100 * st['ci_low']:.1f}, {100 * st['ci_high']:.1f}]"
        mach = m.get("machinery", {})
        ev_cells = [
            "—" if ev is None else f"{_cell(ev, pct=False)} ({', '.join(f'{v:+.2f}' for v in ev['values'])})"
            for ev in (mach.get("value_explained_var"), mach.get("value_explained_var_mc"))
        ]
        lines.append(
            f"| {label(algo)} | {100 * st['mean']:.1f}{ci} | {' | '.join(ev_cells)} | {pct(mach.get('nonzero_advantage_turns'))} "
            f"| {pct(mach.get('equal_return_groups'))} |"
        )
    return [*lines, ""]


def _values_table(res: dict[str, Any]) -> list[str]:
    """The ablation table: per method, success, its difference to SAPO, and its V and Q on held-out episodes."""
    methods = {a: m for a, m in res["methods"].items() if m.get("held_out_values")}
    if not methods:
        return []
    sapo = res["methods"].get("sapo", {}).get("overall", {}).get("success", {}).get("values")
    lines = [
        "## Value functions on held-out episodes",
        "",
        f"After training, each run played {res['config'].get('value_episodes')} episodes of the evaluation split's "
        "tasks (the same for every run) at the training temperature; V(s_t) and Q(s_t, a_t) as the method reads them "
        "are scored against each turn's Monte-Carlo discounted return G_t: explained variance, and V's calibration "
        "mean |V − G_t| (reward units, R_max = 10). KL: token mean of the k3 estimate of the policy's KL from the warm "
        "start on those episodes' actions. Cells: mean ± 95 % CI over seeds; the difference to SAPO is a 95 % Welch "
        "interval over seeds. Minutes: training, evaluation and this scoring, per run.",
        "",
        "| method | success % | − SAPO (points) | V explained var | Q explained var | mean abs(V − G) | KL from start "
        "| minutes per run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for algo, m in methods.items():
        hv, mine = m["held_out_values"], m["overall"]["success"]["values"]
        if sapo is None or algo == "sapo":
            diff = "—"
        else:
            d = welch_difference(mine, sapo)
            diff = f"{100 * d.diff:+.1f}" + ("" if d.low is None else f" [{100 * d.low:+.1f}, {100 * d.high:+.1f}]")
        cells = [
            _cell(hv[k], pct=False) if k in hv else "—"
            for k in ("v_explained_var", "q_explained_var", "v_abs_error", "kl_reference")
        ]
        lines.append(
            f"| {label(algo)} | {_cell(m['overall']['success'])} | {diff} | {' | '.join(cells)} "
            f"| {m['run_seconds'] / 60:.1f} |"
        )
    return [*lines, ""]


def _ranking(res: dict[str, Any]) -> list[str]:
    """Welch intervals of every pair's difference in success, and the seeds the two best would need to be told apart."""
    per_seed = {algo: m["overall"]["success"]["values"] for algo, m in res["methods"].items()}
    order = sorted(per_seed, key=lambda a: -sum(per_seed[a]) / len(per_seed[a]))
    if len(order) < 2:
        return []
    lines = ["## Ranking (differences in held-out success, 95 % Welch interval over seeds)", ""]
    for i, a in enumerate(order):
        for b in order[i + 1 :]:
            d = welch_difference(per_seed[a], per_seed[b])
            ci = "one seed, no interval" if d.low is None else f"[{100 * d.low:+.1f}, {100 * d.high:+.1f}]"
            lines.append(
                f"- {label(a)} − {label(b)}: {100 * d.diff:+.1f} points {ci}" + (" (resolved)" if d.resolved else "")
            )
    a, b = order[:2]
    diff, have = welch_difference(per_seed[a], per_seed[b]).diff, min(len(per_seed[a]), len(per_seed[b]))
    need = seeds_to_resolve(per_seed[a], per_seed[b])
    head = f"Power: the observed difference between the two best, {label(a)} − {label(b)} ({100 * diff:+.1f} points)"
    if have < 2:
        power = f"{head}: not estimated (one seed a side)."
    elif diff == 0:
        power = f"{head}: no difference to resolve."
    else:
        needed = "more than 1,000" if need is None else str(need)
        power = (
            f"{head}, with the seed spreads observed, needs {needed} seeds per method for its 95 % Welch interval "
            f"to exclude 0 (this run has {have})."
        )
    return [*lines, "", power, ""]


def _timing_table(res: dict[str, Any]) -> list[str]:
    head = ["method", *PHASES, "iteration"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for algo, m in res["methods"].items():
        cells = [f"{m['phase_seconds'][p]:.2f}" for p in PHASES]
        lines.append("| " + " | ".join([label(algo), *cells, f"{m['iteration_seconds']:.2f}"]) + " |")
    return lines


def _warm_start_seeds(res: dict[str, Any]) -> str:
    """The sentence saying the warm start was evaluated on more seeds than the runs, when it was."""
    seeds = res.get("warm_start", {}).get("eval_seeds", res["eval_seeds"])
    if seeds == res["eval_seeds"]:
        return ""
    return (
        f" The shared {res['start_name']} is evaluated on seeds {seeds} ({res['warm_start']['summary']['all']['episodes']} "
        "episodes): its evaluation noise enters every gain."
    )


def render_markdown(res: dict[str, Any]) -> str:
    """results.md: the success table (+ a score table when scores give partial credit), the lift lines, the timings."""
    cfg = res["config"]
    seeds = len(res["seeds"])
    subset = f" (first {cfg['eval_tasks']} tasks)" if cfg.get("eval_tasks") else ""
    lines = [
        f"# sapo-gym compare: {', '.join(label(a) for a in res['algos'])} on {res['env']}",
        "",
        (
            f"Evaluation: split `{res['eval_split'] or 'default'}`{subset}, seeds {res['eval_seeds']}, temperature {cfg['eval_temperature']}; "
            f"model `{cfg['model']}`; {cfg['iterations']} iterations × {cfg['episodes_per_iteration']} episodes per method "
            f"(horizon {cfg['horizon'] or 'as registered'}); {seeds} seed(s) per method. Cells: mean ± half-width of the 95 % Student-t "
            "interval over seeds (no interval with one seed)." + _warm_start_seeds(res)
        ),
        "",
        *(
            ["**Incomplete**: not every method/seed has finished; rerun the same command to continue.", ""]
            if not res["complete"]
            else []
        ),
        *_table(res),
        "",
        *(
            ["## Score per category (mean ± 95 % CI over seeds)", "", *_score_table(res), ""]
            if _partial_scores(res)
            else []
        ),
        "## Did RL lift success over the starting policy?",
        "",
        *[f"- {m['lift_line']}" for m in res["methods"].values()],
        "",
        "Collapse (rollout invalid-format rate > 0.5 for 3 iterations, or success falling to 0 and staying there): "
        + "; ".join(
            f"{label(algo)} " + (", ".join(f"seed {k}: {v}" for k, v in m["collapses"].items() if v) or "none")
            for algo, m in res["methods"].items()
        )
        + ".",
        "",
        *_machinery_table(res),
        *_values_table(res),
        *_ranking(res),
        *_held_out_table(res),
        "## Seconds per iteration, by phase (mean over iterations and seeds)",
        "",
        *_timing_table(res),
        "",
    ]
    return "\n".join(lines)


def write_report(cfg: CompareConfig, start: RunResult, runs: Sequence[RunResult], complete: bool) -> dict[str, Any]:
    """Write ``results.json`` and ``results.md`` into ``cfg.out``; return the results dict."""
    from sapo_gym.files import write_atomic

    res = build_results(cfg, start, runs, complete)
    out = Path(cfg.out)
    write_atomic(out / "results.json", json.dumps(res, indent=1, allow_nan=False).encode())
    write_atomic(out / "results.md", render_markdown(res).encode())
    return res
