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

from tests.support.float_bounds import (  # noqa: E402
    U_BF16,
    GradientTerms,
    U,
    adam_tolerance,
    assert_bound_is_a_test,
    clip_ratio,
    excess,
)
from tests.support.strategy_check import dealt, prepare_update, sapo_update, update_step  # noqa: E402
from trainers.strategy import StrategyConfig, TorchStrategy, make_strategy  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HAS_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None


@pytest.fixture(scope="module")
def torch_run() -> tuple[float, dict, float]:
    """The reference: one SAPO update in this process with the plain torch strategy."""
    return sapo_update(TorchStrategy(StrategyConfig(device="cpu")))


class Reference:
    """One SAPO update on the torch strategy, recording what the tolerances need (tests/support/float_bounds.py):
    each gradient entry's terms, the clipped gradient, the optimizer's settings; and the losses computed the
    way ``world`` ranks compute them (``ranked_loss``), so that they can be compared exactly."""

    def __init__(self) -> None:
        self.strategy = TorchStrategy(StrategyConfig(device="cpu"))
        self.u = prepare_update(self.strategy)
        self.params = {n: p for n, p in self.u.actor.module.named_parameters() if p.requires_grad}
        self.loss_before = {w: self.ranked_loss(w, grad=True) for w in (1, 2)}  # at the initial weights
        terms = GradientTerms(self.u.actor.module, self.params)
        step, recorded = self.u.actor.optimizer.step, {}

        def recorded_step(*args, **kwargs):
            recorded["g"] = {n: p.grad.detach().double().clone() for n, p in self.params.items()}
            return step(*args, **kwargs)

        self.u.actor.optimizer.step = recorded_step
        self.loss = update_step(self.strategy, self.u)
        self.u.actor.optimizer.step = step
        terms.remove()
        self.terms, self.g = terms, recorded["g"]
        self.clip = terms.clip_coefficient(self.g)
        self.group = self.u.actor.optimizer.param_groups[0]
        self.weights = self.strategy.full_state_dict(self.u.actor)
        self.size = sum(p.numel() for p in self.params.values())

    def ranked_loss(self, world: int, grad: bool = False, weights: dict | None = None) -> float:
        """``strategy_check.update_step``'s (grad) or ``dealt_loss``'s (no grad) loss on ``world`` ranks: each
        rank's dealt micro-batches (``strategy_check.dealt``) with their weights, its float32 total, then the
        all-reduce (a sum in rank order; with two ranks a + b, exact either way) over world. Every
        micro-batch's forward is the one the rank runs: the same rows, widths, weights and kernels."""
        from trainers.forward import forward_positions

        if weights is not None:
            self.u.actor.module.load_state_dict(weights)
        totals = []
        for r in range(world):
            total = torch.zeros(())
            for micro, weight in dealt(self.u.batch, self.u.micro_batch_size, r, world):
                with torch.set_grad_enabled(grad):
                    out = forward_positions(self.u.actor.module, micro, readout=self.u.method.readout)
                    loss, _ = self.u.method.actor_loss(micro, out)
                total += (loss * weight).detach()
            totals.append(total)
        return float(sum(totals[1:], totals[0]) / world)

    def tolerance(self, other_norm: float) -> dict:
        """Per entry, how far another run's weights after this one step may lie (float_bounds.adam_tolerance)."""
        rho = clip_ratio(self.clip, other_norm, self.strategy.cfg.grad_clip)
        step = {n: {"g": g, "floor": self.terms.noise_floor(n, g, self.clip, rho)} for n, g in self.g.items()}
        return adam_tolerance([step], self.group, 1, self.weights)


@pytest.fixture(scope="module")
def reference() -> Reference:
    return Reference()


BF16_LOSS = 32 * U_BF16
"""How far a bf16-autocast loss may lie from the float32 one: autocast rounds each matmul's output to bf16
(relative U_BF16 = 2^-9 each); a logit passes ~4 of them (two layers, the head), 4·U_BF16 ≈ 8e-3 relative,
and the loss is a mean of per-token terms read off log-probs and values of magnitude <= log V ≈ 7.6:
7.6 · 8e-3 ≈ 0.06 ≈ 32·U_BF16. (Measured: <= 3e-4 on AVX-512, AVX2 and scalar kernels.) The checks that
matter are the drops: a bf16 step must lower the loss as much as a float32 one."""


def _bf16_copy_tolerance(weights: dict, lr: float) -> dict:
    """Per entry, how far a bf16 copy of float32 master weights after one Adam step may lie from the float32
    run's weights: the masters start from the bf16 model (rounded once: half a bf16 spacing, 2^(e-9) for
    |w| in [2^(e-1), 2^e), bf16 having 8 significant bits), differ from the float32 run's by at most two
    Adam steps' worth after one step (|step 1| < lr, either sign: 2·lr), and are rounded to bf16 again:
    2·lr + one bf16 spacing."""
    out = {}
    for n, w in weights.items():
        _, exponent = torch.frexp(w.double().abs() + 2 * lr)
        out[n] = 2 * lr + torch.pow(2.0, exponent - 8).double()
    return out


def _initial_weights() -> dict:
    from agents.policy import PolicyModel

    return {k: v.clone() for k, v in PolicyModel.tiny(seed=0).model.state_dict().items()}


def _max_diff(a: dict, b: dict) -> float:
    assert sorted(a) == sorted(b)
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


def test_torch_update_changes_every_parameter(torch_run):
    loss, weights, after = torch_run
    assert torch.isfinite(torch.tensor(loss))
    # the step lowers the loss on its own batch: by ~0.03, where float32 noise in the loss is ~1e-7
    assert after < loss - 1e-3
    init = _initial_weights()
    unchanged = [k for k in init if torch.equal(init[k], weights[k])]
    assert unchanged == []


def test_gradient_checkpointing_gives_the_same_update(torch_run):
    loss, weights, _ = sapo_update(TorchStrategy(StrategyConfig(device="cpu", gradient_checkpointing=True)))
    # deterministic: the backward recomputes the same forward (same kernels, inputs, weights, process), so
    # the activations, gradients and step are the same floats
    assert loss == torch_run[0]
    assert _max_diff(weights, torch_run[1]) == 0.0


def test_bf16_autocast_update_is_close(torch_run):
    loss, weights, after = sapo_update(TorchStrategy(StrategyConfig(device="cpu", bf16=True)))
    assert loss == pytest.approx(torch_run[0], rel=0, abs=BF16_LOSS)
    assert after == pytest.approx(torch_run[2], rel=0, abs=BF16_LOSS) and after < loss - 1e-3
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
    """Launch tests.support.strategy_check; {stage: [rank 0 result, rank 1 result, ...]}."""
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    args = [
        "-m",
        "tests.support.strategy_check",
        "--backend",
        "deepspeed",
        "--zero-stage",
        stages,
        "--check-resume",
        "--out",
        str(out),
        *extra,
    ]
    if nproc == 1:
        cmd = [sys.executable, *args]
        env["MASTER_PORT"] = str(_free_port())
    else:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            str(nproc),
            "--master_addr",
            "127.0.0.1",
            "--master_port",
            str(_free_port()),
            *args,
        ]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {
        int(st): [torch.load(out / f"zero{st}" / f"rank{r}.pt", weights_only=True) for r in range(nproc)]
        for st in stages.split(",")
    }


@pytest.fixture(scope="module")
def two_process_runs(tmp_path_factory) -> dict[int, list[dict]]:
    """ZeRO-2 and ZeRO-3, one after the other in one 2-process launch (DeepSpeed's start-up paid once)."""
    if not HAS_DEEPSPEED:
        pytest.skip("deepspeed not installed (pip install -e '.[deepspeed]')")
    return _run_check(tmp_path_factory.mktemp("ds2"), 2, "2,3")


@pytest.mark.slow
@pytest.mark.parametrize("stage", [2, 3])
def test_deepspeed_two_processes_match_one_process(two_process_runs, reference, stage):
    """2 CPU processes (gloo): identical weights on both ranks, the single-process loss and update, and a
    save -> load into a fresh engine -> step that equals continuing (model and optimizer state restored)."""
    ranks = two_process_runs[stage]
    assert [r["world_size"] for r in ranks] == [2, 2]
    assert _max_diff(ranks[0]["weights"], ranks[1]["weights"]) == 0.0
    tolerance = reference.tolerance(ranks[0]["grad_norm"])
    assert_bound_is_a_test(tolerance, reference.group["lr"])
    for r in ranks:
        # deterministic: the loss as the two ranks compute it (their dealt micro-batches, then the
        # all-reduce) is the same floats here; it differs from one process's (other micro-batches) by rounding
        assert r["loss"] == reference.loss_before[2]
        # the update, each entry within what float32 rounding of its gradient can do through Adam
        ratio, where = excess(r["weights"], reference.weights, tolerance)
        assert ratio <= 1.0, (where, ratio)
        # the loss it reports after the step is its weights' loss (same floats), and the step lowered it
        assert r["loss_after"] == reference.ranked_loss(2, weights=r["weights"])
        assert r["loss_after"] < r["loss"] - 1e-3
        assert r["grad_norm"] == ranks[0]["grad_norm"]  # one global norm, on every rank
        assert r["resume_gap"] == 0.0
    # the global norm of P entries, their squares summed in another order: a recursive sum of P positive
    # terms is within (P-1)·u of exact, the square root halves that, two runs: P·u
    norm = float(torch.linalg.vector_norm(torch.stack([g.norm() for g in reference.terms.raw.values()])))
    assert ranks[0]["grad_norm"] == pytest.approx(norm, rel=reference.size * U, abs=0)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_DEEPSPEED, reason="deepspeed not installed (pip install -e '.[deepspeed]')")
def test_deepspeed_bf16_one_process(tmp_path, torch_run):
    """DeepSpeed's bf16 mode: bf16 compute, float32 master weights, a step close to the float32 one."""
    (rank,) = _run_check(tmp_path, 1, "2", "--bf16")[2]
    assert rank["loss"] == pytest.approx(torch_run[0], rel=0, abs=BF16_LOSS)
    assert rank["loss_after"] == pytest.approx(torch_run[2], rel=0, abs=BF16_LOSS)
    # the bf16 step lowers the loss as much as the float32 one (a silently skipped step would not):
    # the float32 drop is ~0.03, bf16 noise in either loss <= 3e-4 measured
    assert torch_run[0] - rank["loss_after"] > 0.5 * (torch_run[0] - torch_run[2])
    assert rank["resume_gap"] == 0.0
    # the gathered weights are the bf16 module copy of float32 master weights that took one step
    ratio, where = excess(rank["weights"], torch_run[1], _bf16_copy_tolerance(torch_run[1], 1e-4))
    assert ratio <= 1.0, (where, ratio)
