"""The Trainer on several processes (trainers.distributed): task split, gathered batch, dealt micro-batches,
sharded checkpoints; and, launched with torchrun on CPU, one DeepSpeed iteration equal to one process."""

from __future__ import annotations

import argparse
import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.support.float_bounds import GradientTerms, U, adam_tolerance, assert_bound_is_a_test, clip_ratio, excess  # noqa: E402
from trainers.checkpoint import latest_checkpoint, save_checkpoint, save_sharded  # noqa: E402
from trainers.config import TrainConfig, add_arguments, from_args  # noqa: E402
from trainers.distributed import deal, gather_rollout, gather_stats, map_micro_batches, rank_groups  # noqa: E402
from trainers.experience import TurnRecord  # noqa: E402
from trainers.rollout import DroppedEpisode, EpisodeStats, Rollout, collect, make_train_vec, worker_ids  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HAS_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None


class FakeRanks:
    """The collective calls of a strategy, answering with pre-set per-rank objects (rank 0 is us)."""

    def __init__(self, others: list) -> None:
        self.world_size, self.rank, self.is_main, self.others = 1 + len(others), 0, True, others

    def all_gather_object(self, obj):
        return [obj, *self.others]


def test_rank_groups_are_contiguous_disjoint_and_cover_every_group():
    for tasks, world in [(4, 2), (5, 2), (7, 3), (3, 3)]:
        parts = [rank_groups(tasks, r, world) for r in range(world)]
        assert [g for p in parts for g in p] == list(range(tasks))
        assert max(map(len, parts)) - min(map(len, parts)) <= 1
    with pytest.raises(ValueError, match="task groups"):
        rank_groups(2, 0, 3)


def test_deal_gives_each_micro_batch_to_one_rank_and_pads_with_zero_weight_passes():
    micros = ["m0", "m1", "m2"]
    dealt = [deal(micros, r, 2) for r in range(2)]
    assert dealt[0] == [(0, "m0", True), (2, "m2", True)]
    assert dealt[1] == [(1, "m1", True), (-1, "m0", False)]  # same number of passes: ZeRO's collectives line up
    assert deal(micros, 0, 1) == [(0, "m0", True), (1, "m1", True), (2, "m2", True)]


def test_rank_vec_members_play_what_they_play_in_the_full_env():
    kwargs = TrainConfig(prompt="plain", history_length=0).gym_make_kwargs()
    full = make_train_vec("sapo/Vault-v0", 4, 2, 7, **kwargs)
    part = make_train_vec("sapo/Vault-v0", 4, 2, 7, [2, 3], **kwargs)
    try:
        assert worker_ids(full) == list(range(8)) and worker_ids(part) == [4, 5, 6, 7]
        for episode in range(3):
            assert [e.task_index(episode) for e in part.envs] == [e.task_index(episode) for e in full.envs[4:]]
        act = lambda obs, infos: ["<action>press 1</action>"] * len(obs)  # noqa: E731
        whole, mine = collect(full, act, episode=1, seed=3), collect(part, act, episode=1, seed=3)
        assert [(t.traj_id, t.turn_idx, t.group_id, t.prompt) for t in mine.turns] == [
            (t.traj_id, t.turn_idx, t.group_id, t.prompt) for t in whole.turns if t.traj_id >= 4
        ]
    finally:
        full.close()
        part.close()


def _turn(traj: int, idx: int) -> TurnRecord:
    return TurnRecord(f"p{traj}.{idx}", f"o{traj}.{idx}", 0.0, False, False, traj, idx, traj)


def test_inference_micro_batches_are_dealt_and_gathered_in_order():
    """Rank 0 of 2 scores micro-batches 0, 2, 4 itself; rank 1's 1 and 3 arrive through the gather; every
    rank ends with all five results in batch order (each micro-batch row ``i`` scores ``10 · i``)."""
    from tests.support.turns import turn
    from trainers.experience import Experience

    turns = [turn([5] * (2 + i), [7], [-0.5], traj_id=i) for i in range(5)]
    exp = Experience.collate(turns, pad_id=0)
    seen = []

    def score(mb):
        seen.append(mb.traj_ids.tolist())
        return mb.traj_ids * 10, mb.prompt_lengths

    other = [(1, (torch.tensor([10]), torch.tensor([3]))), (3, (torch.tensor([30]), torch.tensor([5])))]
    out = map_micro_batches(FakeRanks([other]), exp, 1, score)
    assert seen == [[0], [2], [4]]
    assert [int(v) for v, _ in out] == [0, 10, 20, 30, 40] and [int(p) for _, p in out] == [2, 3, 4, 5, 6]
    assert torch.cat([v for v, _ in map_micro_batches(None, exp, 2, score)]).tolist() == [
        0,
        10,
        20,
        30,
        40,
    ]  # one process


def test_gathered_rollout_is_in_single_process_order():
    mine = Rollout([_turn(0, 0), _turn(1, 0), _turn(0, 1)], [EpisodeStats("a", 0, False, 0, 0, 2, 0, False)], 1.0, 0.5)
    lost = DroppedEpisode(4, EpisodeStats("c", 1, False, 0, 0, 1, 0, False), "worker lost")
    other = Rollout(
        [_turn(2, 0), _turn(3, 0), _turn(3, 1), _turn(3, 2)],
        [EpisodeStats("b", 1, True, 1, 1, 3, 0, False)],
        2.0,
        0.1,
        dropped=[lost],
    )
    merged = gather_rollout(FakeRanks([other]), mine)
    assert merged.dropped == [lost]  # an episode another rank lost with its env worker is still reported
    assert [(t.traj_id, t.turn_idx) for t in merged.turns] == [(0, 0), (1, 0), (2, 0), (3, 0), (0, 1), (3, 1), (3, 2)]
    assert [e.task_id for e in merged.episodes] == ["a", "b"]
    assert (merged.generation_s, merged.env_s) == (2.0, 0.5)  # the slowest rank's phase time
    stats = gather_stats(
        FakeRanks([[((0, 0, 1), {"loss": 2.0})]]), [((0, 0, 0), {"loss": 1.0}), ((0, 0, float("inf")), {"n": 3})]
    )
    assert stats == [{"loss": 1.0}, {"loss": 2.0}, {"n": 3}]


def test_sharded_checkpoints_count_once_complete_and_are_pruned(tmp_path):
    written = []
    for it in (1, 2, 3):
        save_sharded(tmp_path, it, lambda d: written.append((d / "actor").mkdir()), True, lambda: None)
    folder = tmp_path / "checkpoints"
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoint-000002", "checkpoint-000003"]
    (folder / "checkpoint-000004").mkdir()  # a save that died before every rank finished
    assert latest_checkpoint(tmp_path).name == "checkpoint-000003"
    save_checkpoint(tmp_path, 5, {"iteration": 5})
    assert latest_checkpoint(tmp_path).name == "checkpoint-000005.pt"
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoint-000003", "checkpoint-000005.pt"]


def test_scale_out_flags_parse_and_are_checked():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    cfg = from_args(parser.parse_args(["--strategy", "deepspeed", "--zero-stage", "3", "--generator", "vllm"]))
    assert (cfg.strategy, cfg.zero_stage, cfg.generator) == ("deepspeed", 3, "vllm")
    with pytest.raises(SystemExit):
        parser.parse_args(["--strategy", "fsdp"])
    for bad in (dict(strategy="fsdp"), dict(generator="sglang"), dict(zero_stage=4)):
        with pytest.raises(ValueError):
            TrainConfig(**bad)


def test_paper_recipe_launches_torchrun_with_deepspeed(tmp_path):
    """NPROC/ZERO_STAGE/GENERATOR turn recipes/paper.sh into a torchrun launch whose flags parse."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "torchrun"  # prints its argv, one per line, instead of launching
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    fake.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        "MODEL_DIR": str(tmp_path / "m"),
        "NPROC": "4",
        "ZERO_STAGE": "3",
        "GENERATOR": "vllm",
    }
    proc = subprocess.run(
        ["bash", str(ROOT / "recipes/paper.sh"), "7b", "alfworld", "grpo", "--bf16"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    argv = proc.stdout.splitlines()
    assert argv[:5] == ["--nproc_per_node", "4", "-m", "sapo_cli", "train"]
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    cfg = from_args(parser.parse_args(argv[5:]))
    assert (cfg.strategy, cfg.zero_stage, cfg.generator, cfg.bf16) == ("deepspeed", 3, "vllm", True)
    assert (cfg.num_tasks, cfg.rollouts_per_task, cfg.lr, cfg.iterations) == (16, 8, 1e-6, 150)


# ---------------------------------------------------------------------------------------------- torchrun


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(out: Path, stages: str, algo: str) -> dict[int, list[dict]]:
    """torchrun --nproc_per_node 2 -m tests.support.strategy_check --trainer: {stage: [rank 0, rank 1]}."""
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(_free_port()),
        "-m",
        "tests.support.strategy_check",
        "--trainer",
        "--algo",
        algo,
        "--zero-stage",
        stages,
        "--out",
        str(out),
    ]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {
        int(s): [torch.load(out / f"trainer{s}" / f"rank{r}.pt", weights_only=False) for r in range(2)]
        for s in stages.split(",")
    }


def _single_process_update(
    turns: list, algo: str, tmp_path: Path, first_step: dict, critic_first_step: dict | None, other_norms: list[float]
) -> tuple[dict, dict, dict, list, dict, dict]:
    """The same config on the torch strategy in this process, learning from the same gathered turns.

    After its first optimizer step the weights are replaced by the 2-rank run's ``first_step`` weights (and
    PPO's critic's by ``critic_first_step``), so that the second step starts where the other run's did:
    Adam amplifies rounding differences in near-zero gradients (see float_bounds), and a second
    forward pass on weights that differ so would compound them. Returns
    the statistics, the weights after the first step (before that swap) and at the end, per step and
    parameter the clipped gradient ``g`` and its float32 noise floor ``floor`` (float_bounds.noise_floor;
    ``other_norms``: the other run's gradient norms, for its clip coefficients), the optimizer's settings and
    the number of trainable entries behind each grad_norm statistic."""
    from tests.support.strategy_check import TRAINER_CHECK
    from trainers.experience import Experience
    from trainers.loop import Trainer
    from trainers.profiling import MemoryMeter, PhaseTimer

    trainer = Trainer(TrainConfig(**TRAINER_CHECK, algo=algo, out_dir=str(tmp_path / f"single-{algo}")))
    trainer.start_reinforcement()
    exp = Experience.collate(turns, trainer.policy.pad_token_id)
    params = {n: p for n, p in trainer.policy.model.named_parameters() if p.requires_grad}  # tied weights once
    terms = GradientTerms(trainer.policy.model, params)
    steps, kept, optimizer_step = [], {}, trainer.optimizer.step

    def recorded_step(*args, **kwargs):
        g = {n: p.grad.detach().double().clone() for n, p in params.items()}
        clip = terms.clip_coefficient(g)
        rho = clip_ratio(clip, other_norms[len(steps)], trainer.cfg.grad_clip)
        record = {n: {"g": g[n], "floor": terms.noise_floor(n, g[n], clip, rho)} for n in params}
        steps.append(record)
        terms.reset()
        out = optimizer_step(*args, **kwargs)
        if len(steps) == 1:
            kept.update({n: p.detach().clone() for n, p in params.items()})
            with torch.no_grad():
                for n, p in params.items():
                    p.copy_(first_step[n])
        return out

    trainer.optimizer.step = recorded_step
    if critic_first_step is not None:
        critic, critic_step = trainer.method.critic, trainer.critic.optimizer.step
        critic_steps = []

        def rebased_critic_step(*args, **kwargs):
            out = critic_step(*args, **kwargs)
            critic_steps.append(1)
            if len(critic_steps) == 1:
                critic.load_state_dict(critic_first_step)
            return out

        trainer.critic.optimizer.step = rebased_critic_step
    stats = trainer.learn(exp, PhaseTimer(), MemoryMeter(trainer.device))
    terms.remove()
    group = trainer.optimizer.param_groups[0]
    assert len(steps) == TRAINER_CHECK["minibatches"]
    weights = trainer.strategy.full_state_dict(trainer.actor)
    sizes = {"actor/grad_norm": sum(p.numel() for p in params.values())}
    if trainer.method.critic is not None:
        sizes["critic/grad_norm"] = sum(p.numel() for p in trainer.method.critic.parameters() if p.requires_grad)
    trainer.close()
    return stats, kept, weights, steps, group, sizes


def _max_diff(a: dict, b: dict) -> float:
    assert sorted(a) == sorted(b)
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


@pytest.fixture(scope="module")
def launches(tmp_path_factory) -> dict[str, dict[int, list[dict]]]:
    if not HAS_DEEPSPEED:
        pytest.skip("deepspeed not installed (pip install -e '.[deepspeed]')")
    out = tmp_path_factory.mktemp("loop2")
    return {"sapo": _launch(out / "sapo", "2,3", "sapo"), "ppo": _launch(out / "ppo", "2", "ppo")}


@pytest.mark.slow
@pytest.mark.parametrize("algo,stage", [("sapo", 2), ("sapo", 3), ("ppo", 2)])
def test_two_process_trainer_iteration_equals_one_process(launches, tmp_path, algo, stage):
    """2 ranks (gloo): disjoint task groups, the same gathered batch and identical weights on both, the
    single-process losses and update from that batch, and a sharded save -> resume -> iteration that
    equals continuing."""
    ranks = launches[algo][stage]
    assert [r["world_size"] for r in ranks] == [2, 2]
    assert [r["groups"] for r in ranks] == [[0, 1], [2, 3]]  # Vault, 4 tasks x 1 rollout, contiguous blocks
    turns = ranks[0]["turns"]
    assert ranks[1]["turns"] == turns
    assert sorted({t.traj_id for t in turns}) == [0, 1, 2, 3]
    assert [(t.turn_idx, t.traj_id) for t in turns] == sorted((t.turn_idx, t.traj_id) for t in turns)
    assert _max_diff(ranks[0]["weights"], ranks[1]["weights"]) == 0.0
    assert _max_diff(ranks[0]["first_step"], ranks[1]["first_step"]) == 0.0
    stats, first, weights, steps, group, sizes = _single_process_update(
        turns, algo, tmp_path, ranks[0]["first_step"], ranks[0]["critic_first_step"], ranks[0]["grad_norms"]
    )
    # Each optimizer step on its own (this process continued from the other run's step-1 weights), every
    # entry within what float32 rounding of its gradient can do through Adam (float_bounds.adam_tolerance).
    tolerances = {
        "first_step": adam_tolerance(steps, group, 1, first),
        "weights": adam_tolerance(steps, group, 2, weights),
    }
    for tol in tolerances.values():
        assert_bound_is_a_test(tol, group["lr"])
    for r in ranks:
        assert r["stats"].keys() == stats.keys()
        for key, value in stats.items():
            if key.endswith("grad_norm"):
                # the norm of P gradient entries, its P squares summed in another order by DeepSpeed: a
                # recursive sum of P positive terms is within (P-1)·u of exact, the square root halves
                # that, two runs: P·u (P: the model's trainable entries)
                assert r["stats"][key] == pytest.approx(value, rel=sizes[key] * U, abs=0), key
            else:
                # every forward pass ran on the same weights (step 2 from the same step-1 weights), inputs
                # and kernels in both runs: the losses, KL, entropy, clip fraction... are the same floats
                assert r["stats"][key] == value, key
        for name, tol in tolerances.items():
            ratio, where = excess(r[name], first if name == "first_step" else weights, tol)
            assert ratio <= 1.0, (name, where, ratio)
        assert _max_diff(r["loaded"], r["weights"]) == 0.0  # the sharded checkpoint restores the weights
        assert r["rows"][0] == r["rows"][1]  # iteration 1: continued == resumed (RNG, optimizer, reference)
        assert _max_diff(r["continued"], r["resumed"]) == 0.0
    assert ranks[0]["rows"] == ranks[1]["rows"]
