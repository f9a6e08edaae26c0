"""trainers.sft: the behaviour-cloning step, whole or in micro-batches."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from agents.policy import PolicyModel  # noqa: E402
from trainers.sft import Demonstration, _batch, clone_step  # noqa: E402


@pytest.mark.parametrize("by_length", [False, True])
def test_a_micro_batched_clone_step_is_the_minibatch_gradient(by_length):
    """Six turns whose prompts run from 1 to 6 words, cloned whole and in micro-batches of 4 and 2 rows (longest
    first when ``by_length``): each micro-batch's token mean, weighted by its share of the tokens, sums to the
    minibatch's token mean, so the loss and the gradient are the same up to the order of summation. The weights
    are float64, but the log-probs are float32 (u = 6e-8): regrouping a sum of n terms moves it by at most ~n·u
    relative, n the action tokens (the loss), and each gradient entry by ~n·u of the largest entry."""
    policy = PolicyModel.tiny(seed=0)
    policy.model.double()
    demos = [
        Demonstration("Task: " + "open the vault " * k, f"<think>try {k}</think><action>press red</action>")
        for k in range(1, 7)
    ]
    batch = _batch(policy, demos)
    assert len(set(batch.attention_mask.sum(1).tolist())) == len(demos)  # lengths differ: the cuts differ

    def gradient(size: int, grouped: bool) -> tuple[float, torch.Tensor]:
        policy.model.zero_grad(set_to_none=True)
        loss = clone_step(policy, batch, size, by_length=grouped)
        return loss, torch.cat([p.grad.flatten() for p in policy.model.parameters() if p.grad is not None])

    whole_loss, whole = gradient(len(batch), False)
    bound = int(batch.action_mask.sum()) * torch.finfo(torch.float32).eps
    for size in (4, 2):
        loss, grad = gradient(size, by_length)
        assert loss == pytest.approx(whole_loss, rel=bound)
        torch.testing.assert_close(grad, whole, rtol=0, atol=bound * float(whole.abs().max()))


def test_the_warm_start_clones_at_temperature_one_whatever_rl_samples_at():
    """``warm_start`` fits the model's own logits (temperature 1): RL's ``--temperature`` is a decoding choice on top,
    so a run sampling at 0.7 starts from the same clone as one at 1 (a clone fitted at 0.7 would sample at 0.7 what one
    fitted at 1 samples at 1: the same fitted distribution)."""
    import dataclasses

    from agents.policy import PolicyModel
    from sapo_gym.prompts import PLAIN_PROMPT
    from trainers.config import TrainConfig
    from trainers.sft import warm_start

    cfg = TrainConfig(
        env="sapo/Vault-v0",
        prompt="plain",
        history_length=0,
        max_response_tokens=16,
        micro_batch_size=16,
        sft_episodes=4,
        sft_agent="random",
        sft_epochs=1,
        sft_lr=3e-3,
    )
    states = []
    for temperature in (1.0, 0.7):
        policy = PolicyModel.tiny(seed=0)
        warm_start(
            policy, dataclasses.replace(cfg, temperature=temperature), {"prompt": PLAIN_PROMPT, "history_length": 0}
        )
        states.append(policy.model.state_dict())
    assert states[0].keys() == states[1].keys()
    for name in states[0]:  # one process, the same operations in the same order: bit for bit
        assert torch.equal(states[0][name], states[1][name]), name


def test_ppos_critic_starts_from_the_cloned_backbone(tmp_path, monkeypatch):
    """``train --sft-episodes`` clones the policy after the trainer built PPO's critic from it: the critic's backbone
    then takes the clone's weights (as compare's runs, which build theirs from the saved clone), its head its own."""
    from trainers.config import TrainConfig
    from trainers.loop import Trainer

    cfg = TrainConfig(
        algo="ppo",
        env="sapo/Vault-v0",
        prompt="plain",
        history_length=0,
        max_response_tokens=16,
        sft_episodes=4,
        sft_agent="random",
        sft_epochs=1,
        sft_lr=3e-3,
        iterations=1,
        out_dir=str(tmp_path),
        progress=False,
    )
    trainer = Trainer(cfg)
    before = {k: v.clone() for k, v in trainer.method.critic.backbone.state_dict().items()}
    seen = {}

    class Stop(Exception):
        pass

    def first_iteration(self):
        seen["critic"] = self.method.critic.backbone.state_dict()
        seen["policy"] = self.policy.model.get_decoder().state_dict()
        raise Stop

    monkeypatch.setattr(Trainer, "run_iteration", first_iteration)
    with pytest.raises(Stop):
        trainer.train()
    assert seen["critic"].keys() == seen["policy"].keys() == before.keys()
    assert all(torch.equal(seen["critic"][k], seen["policy"][k]) for k in before)
    assert not all(torch.equal(seen["policy"][k], before[k]) for k in before)  # the clone did move the weights
