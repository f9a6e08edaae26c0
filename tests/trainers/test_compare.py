"""``sapo-gym compare`` end to end on Vault: tables, plots, bundles the leaderboard admits, resume.

One reduced comparison (tiny model, 3 methods × 2 seeds × 2 iterations, the registered horizon so
the bundles match the hosted Vault board) is shared by the module; the resume test interrupts a
second comparison twice (a crash inside a run, then a ``max_runs`` stop) and must end with the very
same table.
"""

from __future__ import annotations

import json
import struct
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("matplotlib")

REDUCED: dict[str, Any] = {
    "env": "sapo/Vault-v0",
    "env_arg": [],
    "tiny_hidden_size": 64,
    "eval_split": "test",
    "algos": "sapo,ppo,grpo",
    "seeds": 2,
    "iterations": 2,
    "horizon": 0,
    "episodes_per_iteration": 8,
    "grpo_group_size": 4,
    "history_length": 0,
    "max_response_tokens": 16,
    "max_prompt_tokens": 256,
    "lr": 1e-3,
    "critic_lr": 1e-3,
    "sft_episodes": 8,
    "sft_epochs": 8,
    "sft_lr": 3e-3,
    "eval_seeds": "0",
    "eval_batch_size": 16,
    "progress": False,
    "workers": 1,
    "constrain": "none",
    "old_log_probs": "recompute",
    "sft_agent": "expert",
    "eval_every": 1,
    "value_episodes": 4,
}


def _config(out: Path, **overrides: Any):
    from trainers.compare.config import CompareConfig

    return CompareConfig().replace(**{**REDUCED, "out": str(out), **overrides})  # TrainConfig fields go to cfg.train


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Any, dict[str, Any]]:
    from trainers.compare import compare

    cfg = _config(tmp_path_factory.mktemp("compare") / "out")
    return cfg, compare(cfg)


def _comparable(res: dict[str, Any]) -> dict[str, Any]:
    """results.json without what legitimately differs between two identical runs: paths and timings."""
    out = json.loads(json.dumps(res))
    out["config"].pop("out")
    out["config"].pop("max_runs")
    out["config"].pop("workers")
    out["warm_start"].pop("train_s")
    out["warm_start"].pop("bundle")
    for m in out["methods"].values():
        for key in ("phase_seconds", "iteration_seconds", "run_seconds", "bundles"):
            m.pop(key)
    return out


def test_results_json_has_the_documented_fields(finished):
    cfg, res = finished
    stored = json.loads((Path(cfg.out) / "results.json").read_text())
    assert stored == json.loads(json.dumps(res))
    assert res["complete"] and res["algos"] == ["sapo", "ppo", "grpo"] and res["seeds"] == [0, 1]
    assert res["categories"] == ["code2"]
    for algo, m in res["methods"].items():
        assert m["seeds"] == [0, 1]
        for stat in (m["overall"]["success"], m["overall"]["score"], m["categories"]["code2"]["success"]):
            assert len(stat["values"]) == 2 and stat["ci_low"] <= stat["mean"] <= stat["ci_high"]
        per_seed = [m["per_seed"][s]["all"]["success"] for s in ("0", "1")]
        assert m["overall"]["success"]["values"] == per_seed
        assert m["lift"]["baseline"] == res["warm_start"]["summary"]["all"]["success"]
        assert m["lift"]["verdict"] in ("lifted", "lowered", "no detectable change")
        assert f"{100 * m['lift']['baseline']:.1f} %" in m["lift_line"]
        assert set(m["phase_seconds"]) == {
            "generation",
            "old_log_prob",
            "reward",
            "reference",
            "value",
            "advantage",
            "critic_update",
            "actor_update",
        }
        assert m["phase_seconds"]["generation"] > 0 and m["phase_seconds"]["actor_update"] > 0
        # only PPO has a critic: its update takes tens of ms. (That the other methods' critic phase does no
        # work is test_methods' op count: a wall-clock bound on a no-op phase fails when the machine stalls.)
        assert m["phase_seconds"]["critic_update"] > 1e-3 or algo != "ppo"
        assert m["curves"]["iteration"] == [0, 1] and all(len(c) == 2 for c in m["curves"]["rollout_success"])
        # held out: the warm start (0), the periodic evaluation after iteration 1, the final evaluation (2)
        assert m["curves"]["held_out_iteration"] == [0, 1, 2]
        start_first_seed = res["warm_start"]["summary"]["all"]["success"]  # eval_seeds is just "0" here
        for seed, curve in zip(m["seeds"], m["curves"]["held_out_success"]):
            assert curve[0] == start_first_seed and curve[-1] == m["per_seed"][str(seed)]["all"]["success"]
            assert all(0.0 <= v <= 1.0 for v in curve)


def test_each_runs_value_function_is_scored_on_held_out_episodes(finished):
    """``value_episodes``: SAPO's V and Q and PPO's V scored on held-out episodes, GRPO has none; KL from the start."""
    cfg, res = finished
    for algo, m in res["methods"].items():
        hv = m["held_out_values"]
        assert hv["episodes"]["values"] == [4.0, 4.0] and hv["turns"]["mean"] >= 4
        assert ("v_explained_var" in hv) == (algo != "grpo") and ("q_explained_var" in hv) == (algo == "sapo")
        assert all(v >= 0 for v in hv["kl_reference"]["values"]) and m["run_seconds"] > 0
        if algo != "grpo":
            assert all(v >= 0 for v in hv["v_abs_error"]["values"])
    table = (Path(cfg.out) / "results.md").read_text()
    assert "## Value functions on held-out episodes" in table and "| GRPO | " in table


def test_results_say_what_each_methods_machinery_did(finished):
    cfg, res = finished
    for algo, m in res["methods"].items():
        mach, rows = m["machinery"], [r for s in m["curves"]["value_explained_var"] for r in s]
        assert 0.0 <= mach["nonzero_advantage_turns"] <= 1.0
        if algo == "grpo":  # no V; its groups of G = 4 rollouts are counted
            assert mach["value_explained_var"] is None and mach["value_explained_var_mc"] is None
            assert all(v is None for v in rows)
            assert 0.0 <= mach["equal_return_groups"] <= 1.0
        else:  # a V per seed (the mean over the second half of training: iteration 1 of 2), no groups
            assert len(mach["value_explained_var"]["values"]) == 2 and all(v is not None for v in rows)
            assert mach["value_explained_var"]["values"] == [s[1] for s in m["curves"]["value_explained_var"]]
            assert len(mach["value_explained_var_mc"]["values"]) == 2
            assert mach["equal_return_groups"] is None
    md = (Path(cfg.out) / "results.md").read_text()
    assert "## What each method's machinery did" in md and "| GRPO | " in md.split("machinery did")[1]
    assert "## Ranking" in md and "Power: the observed difference between the two best" in md


def test_periodic_held_out_evaluation_leaves_the_run_unchanged(finished, tmp_path):
    """The evaluation reseeds torch; the RNG state is restored after it, so the run is the same without it."""
    from trainers.compare import compare

    _, full = finished
    quiet = compare(_config(tmp_path / "out", algos="sapo", seeds=1, eval_every=0))
    ours, theirs = quiet["methods"]["sapo"], full["methods"]["sapo"]
    assert "held_out_success" not in ours["curves"] or ours["curves"]["held_out_iteration"] == [0, 2]
    assert ours["curves"]["rollout_success"][0] == theirs["curves"]["rollout_success"][0]
    assert ours["per_seed"]["0"] == theirs["per_seed"]["0"]


def test_markdown_table_and_lift_lines(finished):
    cfg, res = finished
    md = (Path(cfg.out) / "results.md").read_text()
    assert "| method | seeds | success % (all) | score (all) | code2 % |" in md
    for algo, m in res["methods"].items():
        assert f"| {algo.upper()} | 2 | " in md
        assert m["lift_line"] in md
    assert "behaviour-cloning warm start" in md and "Incomplete" not in md
    assert "| SAPO | " in md.split("by phase")[1]


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_plots_are_valid_png_and_svg(finished):
    cfg, _ = finished
    plots = Path(cfg.out) / "plots"
    for name in ("learning_curves", "value_explained_var", "advantage_signal", "category_success", "phase_times"):
        width, height = _png_size(plots / f"{name}.png")
        assert width > 400 and height > 150 and (plots / f"{name}.png").stat().st_size > 10_000
        root = ET.parse(plots / f"{name}.svg").getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert len(list(root.iter("{http://www.w3.org/2000/svg}path"))) > 20
    svg = (plots / "phase_times.svg").read_text()
    assert "actor update" in svg and "GRPO" in svg


def test_every_bundle_is_admitted_and_replays(finished):
    from leaderboard.boards import BoardRegistry
    from leaderboard.checks import admit
    from leaderboard.replay import replay_bundle
    from sapo_gym.bundle import parse_bundle

    _, res = finished
    boards = BoardRegistry(["sapo/Vault-v0:test"])
    paths = [res["warm_start"]["bundle"], *[b for m in res["methods"].values() for b in m["bundles"]]]
    assert len(paths) == 1 + 3 * 2
    for path in paths:
        bundle = parse_bundle(Path(path).read_bytes())
        assert admit(bundle, boards).key == "sapo/Vault-v0:test"
        assert bundle["agent"]["algorithm"] in ("SAPO", "PPO", "GRPO", "behaviour cloning")
        assert bundle["agent"]["decoding"] == REDUCED["constrain"]  # how every policy decoded, in its metadata
    replay = replay_bundle(parse_bundle(Path(paths[1]).read_bytes()))
    assert replay.verified, replay.message


def test_interrupted_compare_resumes_and_ends_with_the_same_table(finished, tmp_path, monkeypatch):
    from trainers.compare import compare, runner

    _, full = finished
    started: list[str] = []
    real_run_one, real_eval = runner.run_one, runner.evaluate_policy

    def spy_run_one(cfg, algo, seed, model_path):
        started.append(f"{algo}-seed{seed}")
        return real_run_one(cfg, algo, seed, model_path)

    evals = []

    def killed_at_second_run_eval(policy, tcfg, cfg, env_kwargs, seeds=None):
        if seeds is None:  # the final evaluations (not the periodic held-out ones)
            evals.append(tcfg.out_dir)
        if len(evals) == 3:  # warm start, sapo-seed0, then ppo-seed0 dies after training, before its result
            raise KeyboardInterrupt
        return real_eval(policy, tcfg, cfg, env_kwargs, seeds)

    monkeypatch.setattr(runner, "run_one", spy_run_one)
    monkeypatch.setattr(runner, "evaluate_policy", killed_at_second_run_eval)
    cfg = _config(tmp_path / "out")
    with pytest.raises(KeyboardInterrupt):
        compare(cfg)
    state = json.loads((tmp_path / "out" / "state.json").read_text())
    assert state["warm_start_done"] and state["finished"] == ["sapo-seed0"]
    assert (tmp_path / "out" / "runs" / "ppo-seed0" / "checkpoints").is_dir()

    monkeypatch.setattr(runner, "evaluate_policy", real_eval)
    started.clear()
    partial = compare(_config(tmp_path / "out", max_runs=1))
    assert started == ["ppo-seed0"] and not partial["complete"]
    assert "Incomplete" in (tmp_path / "out" / "results.md").read_text()
    metrics = (tmp_path / "out" / "runs" / "ppo-seed0" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(r)["iteration"] for r in metrics] == [0, 1]  # resumed from its checkpoint, not retrained

    started.clear()
    final = compare(cfg)
    assert started == ["grpo-seed0", "sapo-seed1", "ppo-seed1", "grpo-seed1"]
    assert final["complete"]
    assert _comparable(final) == _comparable(full)


def test_parallel_runs_give_the_same_numbers(finished, tmp_path):
    """--workers 2: two runs train at once in spawned processes; every number equals the sequential run's."""
    from trainers.compare import compare

    full_cfg, full = finished
    parallel = compare(_config(tmp_path / "out", workers=2))
    assert parallel["complete"] and parallel["config"]["workers"] == 2
    assert _comparable(parallel) == _comparable(full)


def test_a_folder_of_another_comparison_is_refused(finished):
    from trainers.compare.runner import CompareState

    cfg, _ = finished
    with pytest.raises(ValueError, match="other settings"):
        CompareState.open(_config(Path(cfg.out), iterations=3))


def test_without_warm_start_every_seed_starts_from_the_same_tiny_init(tmp_path):
    import torch

    from agents.policy import PolicyModel
    from trainers.compare.runner import CompareState, prepare_warm_start

    cfg = _config(tmp_path / "out", sft_episodes=0)
    path, start = prepare_warm_start(cfg, CompareState.open(cfg))
    assert path == str(tmp_path / "out" / "warm_start" / "policy") and start.extra["sft_loss"] == []
    saved, base = PolicyModel.from_pretrained(path).model.state_dict(), PolicyModel.tiny(seed=0).model.state_dict()
    assert saved.keys() == base.keys() and all(torch.equal(saved[k], base[k]) for k in base)
    assert start.summary["all"]["episodes"] == 16


def test_a_lora_compare_starts_every_run_from_a_full_saved_model(tmp_path):
    from sapo_cli import main

    # the shared warm start saves the whole model (the runs put their adapters on it), not only LoRA adapters
    out = tmp_path / "lora"
    assert (
        main(
            [
                "compare",
                "--preset",
                "vault",
                "--algos",
                "sapo",
                "--seeds",
                "1",
                "--iterations",
                "1",
                "--lora-rank",
                "4",
                "--sft-episodes",
                "0",
                "--eval-seeds",
                "0",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    assert (out / "warm_start" / "policy" / "config.json").exists() and (
        out / "runs" / "sapo-seed0" / "result.json"
    ).exists()


def test_the_warm_start_is_evaluated_on_more_seeds_in_a_second_process_with_the_same_numbers(tmp_path):
    """``warm_start_eval_seeds``: the runs' seeds are evaluated as before (the same records), the extra ones in a
    second process with ``workers`` 2, which gives the very records one process gives; the bundle lists every seed."""
    from trainers.compare.runner import CompareState, prepare_warm_start

    def start(name: str, **overrides: Any):
        cfg = _config(tmp_path / name, sft_episodes=0, **overrides)
        _, result = prepare_warm_start(cfg, CompareState.open(cfg))
        return [
            (e["task_id"], e["seed"], e["success"], [t["output"] for t in e["turns"]])
            for e in json.loads(Path(result.bundle).read_text())["episodes"]
        ], result

    plain, _ = start("plain")
    more, result = start("more", warm_start_eval_seeds="0,1,2", workers=1)
    beside, _ = start("beside", warm_start_eval_seeds="0,1,2", workers=2)
    assert [e for e in more if e[1] == 0] == plain  # the runs' seed: untouched
    assert sorted({e[1] for e in more}) == [0, 1, 2] and result.summary["all"]["episodes"] == 3 * len(plain)
    assert beside == more
    assert json.loads(Path(result.bundle).read_text())["evaluation"]["seeds"] == [0, 1, 2]


def test_each_extra_warm_start_seed_draws_its_own_episodes_where_the_env_ignores_the_seed(tmp_path):
    """WebShop's episode is its goal alone: an extra seed evaluated under the runs' sampling seed would replay seed 0's
    episodes (it did, in a first version: 7 extra seeds of WebShop-Mini, each exactly seed 0's 100 episodes)."""
    from trainers.compare.runner import CompareState, prepare_warm_start

    cfg = _config(
        tmp_path / "ws",
        env="sapo/WebShop-Mini-v0",
        eval_split="test",
        sft_episodes=0,
        eval_tasks=4,
        eval_seeds="0",
        warm_start_eval_seeds="0,1,2",
        max_response_tokens=12,
        max_prompt_tokens=1024,
    )
    _, result = prepare_warm_start(cfg, CompareState.open(cfg))
    outputs = {}
    for e in json.loads(Path(result.bundle).read_text())["episodes"]:
        outputs.setdefault(e["seed"], []).append(e["turns"][0]["output"])
    assert sorted(outputs) == [0, 1, 2] and all(len(v) == 4 for v in outputs.values())
    # a random-init model's 12 sampled tokens: two independent draws agree on all four goals with probability ~0
    assert outputs[0] != outputs[1] and outputs[1] != outputs[2] and outputs[0] != outputs[2]


def test_warm_start_eval_seeds_must_hold_every_evaluation_seed(tmp_path):
    cfg = _config(tmp_path, eval_seeds="0,1", warm_start_eval_seeds="1,0,1,5")
    assert cfg.warm_start_seed_list == [1, 0, 5] and cfg.warm_start_extra_seeds == [5]
    assert _config(tmp_path, eval_seeds="0,1").warm_start_seed_list == [0, 1]
    with pytest.raises(ValueError, match="missing \\[1\\]"):
        _config(tmp_path, eval_seeds="0,1", warm_start_eval_seeds="0,2")
    from trainers.compare.report import _warm_start_seeds

    res = {
        "eval_seeds": [0, 1],
        "start_name": "behaviour-cloning warm start",
        "warm_start": {"eval_seeds": [0, 1, 5], "summary": {"all": {"episodes": 30}}},
    }
    assert "evaluated on seeds [0, 1, 5] (30 episodes)" in _warm_start_seeds(res)
    assert _warm_start_seeds({**res, "warm_start": {**res["warm_start"], "eval_seeds": [0, 1]}}) == ""
