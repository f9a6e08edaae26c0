"""Training strategies: one SAPO update through plain torch and through DeepSpeed ZeRO-2/3 (1 and 2 processes)."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from trainers.strategy import StrategyConfig, TorchStrategy, make_strategy  # noqa: E402
from trainers.strategy_check import sapo_update  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HAS_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None


@pytest.fixture(scope="module")
def torch_run() -> tuple[float, dict, float]:
    """The reference: one SAPO update in this process with the plain torch strategy."""
    return sapo_update(TorchStrategy(StrategyConfig(device="cpu")))


def _initial_weights() -> dict:
    from agents.policy import PolicyModel

    return {k: v.clone() for k, v in PolicyModel.tiny(seed=0).model.state_dict().items()}


def _max_diff(a: dict, b: dict) -> float:
    assert sorted(a) == sorted(b)
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


def test_torch_update_changes_every_parameter(torch_run):
    loss, weights, after = torch_run
    assert torch.isfinite(torch.tensor(loss))
    assert after < loss - 1e-3  # the step lowers the loss on its own batch
    init = _initial_weights()
    unchanged = [k for k in init if torch.equal(init[k], weights[k])]
    assert unchanged == []


def test_gradient_checkpointing_gives_the_same_update(torch_run):
    loss, weights, _ = sapo_update(TorchStrategy(StrategyConfig(device="cpu", gradient_checkpointing=True)))
    assert loss == pytest.approx(torch_run[0], rel=1e-6)
    assert _max_diff(weights, torch_run[1]) < 1e-6


def test_bf16_autocast_update_is_close(torch_run):
    loss, weights, after = sapo_update(TorchStrategy(StrategyConfig(device="cpu", bf16=True)))
    assert loss == pytest.approx(torch_run[0], rel=0.1, abs=1e-2)
    assert after == pytest.approx(torch_run[2], rel=0.1, abs=1e-2) and after < loss - 1e-3
    assert all(v.dtype == torch.float32 for v in weights.values())  # master weights stay float32


def test_torch_save_load_round_trip(tmp_path):
    from agents.policy import PolicyModel

    strategy = make_strategy(StrategyConfig(backend="torch", device="cpu"))

    def trained() -> tuple:
        policy = PolicyModel.tiny(seed=0)
        actor = strategy.prepare(policy.model, lr=1e-3)
        ids = torch.randint(3, 100, (2, 7), generator=torch.Generator().manual_seed(1))
        return actor, ids

    def one_step(actor, ids) -> None:
        out = actor(input_ids=ids, labels=ids)
        strategy.backward(actor, out.loss)
        assert strategy.step(actor) > 0

    a, ids = trained()
    one_step(a, ids)
    strategy.save(a, tmp_path)
    b, _ = trained()
    strategy.load(b, tmp_path)
    one_step(a, ids)
    one_step(b, ids)  # the same second step needs the restored Adam moments too
    assert _max_diff(strategy.full_state_dict(a), strategy.full_state_dict(b)) == 0.0


def test_unknown_backend_and_stage_are_rejected():
    with pytest.raises(ValueError):
        make_strategy(StrategyConfig(backend="fsdp"))  # type: ignore[arg-type]
    if HAS_DEEPSPEED:
        from trainers.strategy import DeepSpeedStrategy

        with pytest.raises(ValueError):
            DeepSpeedStrategy(StrategyConfig(backend="deepspeed", zero_stage=4))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_check(out: Path, nproc: int, stages: str, *extra: str) -> dict[int, list[dict]]:
    """Launch trainers.strategy_check; {stage: [rank 0 result, rank 1 result, ...]}."""
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    args = ["-m", "trainers.strategy_check", "--backend", "deepspeed", "--zero-stage", stages, "--check-resume",
            "--out", str(out), *extra]
    if nproc == 1:
        cmd = [sys.executable, *args]
        env["MASTER_PORT"] = str(_free_port())
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
               "--master_addr", "127.0.0.1", "--master_port", str(_free_port()), *args]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {int(st): [torch.load(out / f"zero{st}" / f"rank{r}.pt", weights_only=True) for r in range(nproc)]
            for st in stages.split(",")}


@pytest.fixture(scope="module")
def two_process_runs(tmp_path_factory) -> dict[int, list[dict]]:
    """ZeRO-2 and ZeRO-3, one after the other in one 2-process launch (DeepSpeed's start-up paid once)."""
    if not HAS_DEEPSPEED:
        pytest.skip("deepspeed not installed (pip install -e '.[deepspeed]')")
    return _run_check(tmp_path_factory.mktemp("ds2"), 2, "2,3")


@pytest.mark.slow
@pytest.mark.parametrize("stage", [2, 3])
def test_deepspeed_two_processes_match_one_process(two_process_runs, torch_run, stage):
    """2 CPU processes (gloo): identical weights on both ranks, the single-process loss and update, and a
    save -> load into a fresh engine -> step that equals continuing (model and optimizer state restored)."""
    ranks = two_process_runs[stage]
    assert [r["world_size"] for r in ranks] == [2, 2]
    assert _max_diff(ranks[0]["weights"], ranks[1]["weights"]) == 0.0
    for r in ranks:
        assert r["loss"] == pytest.approx(torch_run[0], rel=1e-5)
        assert r["loss_after"] == pytest.approx(torch_run[2], rel=1e-4)
        # the update is ~lr = 1e-4 per element; agreement to 1e-6 means the same step, not just a close one
        assert _max_diff(r["weights"], torch_run[1]) < 1e-6
        assert r["resume_gap"] == 0.0


@pytest.mark.slow
@pytest.mark.skipif(not HAS_DEEPSPEED, reason="deepspeed not installed (pip install -e '.[deepspeed]')")
def test_deepspeed_bf16_one_process(tmp_path, torch_run):
    """DeepSpeed's bf16 mode: bf16 compute, float32 master weights, a step close to the float32 one."""
    (rank,) = _run_check(tmp_path, 1, "2", "--bf16")[2]
    assert rank["loss"] == pytest.approx(torch_run[0], rel=0.05)
    # the bf16 step lowers the loss as much as the float32 one (a silently skipped step would not)
    assert rank["loss_after"] == pytest.approx(torch_run[2], rel=0.05)
    assert torch_run[0] - rank["loss_after"] > 0.5 * (torch_run[0] - torch_run[2])
    assert rank["resume_gap"] == 0.0
    # the gathered weights are the bf16 module copy: equal to the fp32 run up to bf16 rounding (2^-8 relative)
    assert _max_diff(rank["weights"], torch_run[1]) < 1e-3
