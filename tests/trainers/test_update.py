"""``trainers.update.update``: the one update path of the actor and PPO's critic."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tests.support.strategy_check import synthetic_turns  # noqa: E402
from trainers.experience import Experience  # noqa: E402
from trainers.profiling import MemoryMeter  # noqa: E402
from trainers.strategy import StrategyConfig, TorchStrategy, TrainingDiverged  # noqa: E402
from trainers.update import update  # noqa: E402


def _batch() -> Experience:
    """8 turns (4 trajectories × 2) of the strategy check's synthetic batch."""
    return Experience.collate(synthetic_turns(vocab=50, banned=(0, 1)), pad_id=0)


def _features(exp: Experience) -> torch.Tensor:
    """(B, 3) float64 features of each turn: its reward, turn index and a constant."""
    return torch.stack([exp.rewards.double(), exp.turn_idx.double(), torch.ones(len(exp), dtype=torch.float64)], 1)


def _loss(weight: torch.nn.Parameter):
    def loss(micro: Experience) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        err = _features(micro) @ weight - micro.traj_ids.double()
        value = (err**2).mean()
        return value, {"sq": value.detach()}

    return loss


@pytest.mark.parametrize("by_length", [False, True])
def test_micro_batch_accumulation_is_the_minibatch_gradient(by_length):
    """Micro-batches of 3, 3 and 2 rows, weighted len(micro)/len(minibatch), sum to the gradient of the
    minibatch's mean loss, whichever rows share a micro-batch (``by_length``: longest rows first). float64
    throughout: each gradient entry sums 8 terms of a few ops each, so the two orders of summation differ by a
    few ulps of 1e-16 relative; rtol 1e-12 leaves room."""
    exp = _batch()
    lengths = []
    toy = torch.nn.Module()
    toy.weight = weight = torch.nn.Parameter(torch.tensor([0.3, -0.2, 0.1], dtype=torch.float64))
    strategy = TorchStrategy(StrategyConfig(grad_clip=0.0, device="cpu"))
    actor = strategy.prepare(toy, lr=1e-2, name="toy")
    seen = []
    strategy._step = lambda trainable: seen.append(weight.grad.clone()) or 1.0  # the accumulated gradient, no step
    loss = _loss(weight)

    def recorded(micro: Experience):
        lengths.extend(micro.attention_mask.sum(1).tolist())
        return loss(micro)

    stats = update(
        strategy,
        actor,
        exp,
        recorded,
        epochs=1,
        minibatches=1,
        micro_batch_size=3,
        shuffle=torch.Generator().manual_seed(0),
        memory=MemoryMeter(torch.device("cpu")),
        by_length=by_length,
    )
    want = torch.autograd.grad(_loss(weight)(exp)[0], weight)[0]
    assert len(seen) == 1 and sorted(lengths) == sorted(exp.attention_mask.sum(1).tolist())
    assert len(set(lengths)) > 1  # the batch's rows differ in length, so the order below says something
    assert (lengths == sorted(lengths, reverse=True)) == by_length
    torch.testing.assert_close(seen[0], want, rtol=1e-12, atol=0.0)
    assert set(stats) == {"sq", "grad_norm"}


def test_a_non_finite_critic_loss_stops_the_run_before_its_step(make_trainer):
    """The critic goes through the same strategy checks as the actor: TrainingDiverged, critic untouched."""
    trainer = make_trainer("ppo")
    before = {n: p.detach().clone() for n, p in trainer.critic.module.named_parameters()}

    def poisoned(micro):
        loss, stats = type(trainer.method).critic_loss(trainer.method, micro)
        return loss * float("nan"), stats

    trainer.method.critic_loss = poisoned
    with pytest.raises(TrainingDiverged, match="non-finite critic loss .* at iteration 0 of ppo"):
        trainer.run_iteration()
    assert all(torch.equal(before[n], p) for n, p in trainer.critic.module.named_parameters())
