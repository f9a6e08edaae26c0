"""Admissible-action constrained decoding (agents/constraint.py): the trie, the mask, and the same
mask in sampling, old / current log-probs and entropy."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from agents.constraint import CLOSE_TAG, ConstraintBuilder, allowed_matrix, restrict_logits

ADMISSIBLE = ["open drawer 2", "take pen 1 from drawer 2", "go to shelf 3", "go to shelf 12", "examine desk 1"]


def _ids(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def test_restrict_logits_by_hand():
    logits = torch.tensor([[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [0.5, 0.5, 0.5, 0.5]])
    allowed = torch.tensor(
        [[0, 2], [-1, -1], [3, -1]]
    )  # row 0: {0, 2} (token 0 beside padding), row 1 free, row 2: {3}
    out = restrict_logits(logits, allowed)
    inf = float("-inf")
    assert out.tolist() == [[1.0, inf, 3.0, inf], [1.0, 2.0, 3.0, 4.0], [inf, inf, inf, 0.5]]
    assert restrict_logits(logits, None) is logits
    assert restrict_logits(logits, torch.full((3, 1), -1)) is logits  # all free: unchanged, no copy


def test_allowed_matrix_pads_and_marks_free_rows():
    m = allowed_matrix([(3, 5), None, (7,)])
    assert m.tolist() == [[3, 5], [-1, -1], [7, -1]]
    assert allowed_matrix([None, None]).tolist() == [[-1], [-1]]


def test_trie_walk_forces_the_rest_of_an_action(tiny_policy):
    tok = tiny_policy.tokenizer
    builder = ConstraintBuilder(tok)
    c = builder.build(ADMISSIBLE)
    assert not c.fallback and c.allowed() is None  # free until <action>
    for t in _ids(tok, "<think>x</think><action>"):
        assert c.allowed() is None
        c.advance(t)
    first = c.allowed()
    assert first == tuple(sorted({_ids(tok, a + CLOSE_TAG)[0] for a in ADMISSIBLE}))
    seq = _ids(tok, "go to shelf 12" + CLOSE_TAG)
    for t in seq:
        allowed = c.allowed()
        assert allowed is not None and t in allowed
        c.advance(t)
    assert c.allowed() is None  # after </action>: free again, and never re-entered
    for t in _ids(tok, "<action>"):
        c.advance(t)
    assert c.allowed() is None
    with pytest.raises(ValueError):
        fresh = builder.build(ADMISSIBLE)
        fresh.advance(_ids(tok, "<action>")[0])
        fresh.advance(_ids(tok, "inventory")[0])  # not a continuation of any admissible action


@pytest.mark.parametrize("bad", [None, [], [""], ["  "], [1, 2], "go to shelf 3"])
def test_bad_admissible_lists_fall_back_to_free_decoding(tiny_policy, bad):
    c = ConstraintBuilder(tiny_policy.tokenizer).build(bad)
    assert c.fallback
    for t in _ids(tiny_policy.tokenizer, "<action>go"):
        c.advance(t)
        assert c.allowed() is None


def _boost_action_tag(policy):
    """Steer the untrained model into writing <action> (the only way into the trie) at every free step."""
    tag = _ids(policy.tokenizer, "<action>")[0]

    def edit(logits, positions):
        logits[..., tag] += 50.0

    return edit


def test_sampled_actions_are_always_admissible_and_fallback_is_flagged(tiny_policy, steer):
    from agents.generation.base import GenerationParams
    from agents.llm import LLMAgent
    from sapo_gym.parsing import parse_action

    agent = LLMAgent(
        tiny_policy, params=GenerationParams(max_new_tokens=16, temperature=1.0), seed=3, constrain="admissible"
    )
    obs = ["Task: put a pen in the shelf.\nObservation: you are in a room.\n"] * 32
    infos = [{"admissible_actions": ADMISSIBLE}] * 31 + [{"admissible_actions": []}]
    with steer(tiny_policy, _boost_action_tag(tiny_policy)):
        turns = agent.act_detailed(obs, infos)
    for turn in turns[:31]:
        parsed = parse_action(turn.text, fallback_chars=30)
        assert parsed.action in ADMISSIBLE, turn.text
        assert not turn.constraint_fallback
        assert len(turn.allowed_tokens) == len(turn.token_ids)
    assert len({parse_action(t.text, fallback_chars=30).action for t in turns[:31]}) > 1  # a real choice, not one path
    assert turns[31].constraint_fallback and all(a is None for a in turns[31].allowed_tokens)


@pytest.fixture(scope="module")
def cloned_policy():
    """A tiny policy taught to write <think>…</think><action>…</action> (so it enters the trie by itself)."""
    from agents.policy import PolicyModel
    from trainers.sft import Demonstration, behaviour_clone

    torch.manual_seed(0)
    policy = PolicyModel.tiny(seed=1)
    demos = [Demonstration("Task: x\nActions: [go to desk 1]\n", "<think>ok</think><action>go to desk 1</action>")] * 16
    behaviour_clone(policy, demos, epochs=20, lr=3e-3)
    return policy


def test_the_same_mask_in_sampling_old_current_log_probs_and_entropy(cloned_policy):
    """Sampler log-probs == the trainer's masked recompute; entropy 0 where the trie forces a token."""
    from agents.generation.base import GenerationParams
    from agents.llm import LLMAgent
    from trainers.experience import Experience, TurnRecord
    from trainers.forward import action_entropy, action_log_probs, forward_positions

    policy = cloned_policy
    agent = LLMAgent(
        policy, params=GenerationParams(max_new_tokens=24, temperature=1.0), seed=0, constrain="admissible"
    )
    turns = agent.act_detailed(["Task: x\nActions: [...]\n"] * 12, [{"admissible_actions": ADMISSIBLE}] * 12)
    assert sum(any(a is not None for a in t.allowed_tokens) for t in turns) >= 6  # most rows entered the trie
    exp = Experience.collate(
        [TurnRecord("", t, 0.0, False, False, i, 0) for i, t in enumerate(turns)], policy.pad_token_id
    )
    with torch.no_grad():
        logits = forward_positions(policy.model, exp)
        recomputed = action_log_probs(logits, exp, policy.value_token_ids, 1.0)
        entropy = action_entropy(logits, exp, policy.value_token_ids, 1.0)
        free = Experience.collate(
            [TurnRecord("", replace(t, allowed_tokens=None), 0.0, False, False, i, 0) for i, t in enumerate(turns)],
            policy.pad_token_id,
        )
        unmasked = action_log_probs(logits, free, policy.value_token_ids, 1.0)
    # Same weights, float32, the same masked softmax; only the kernels differ (KV-cache decode vs one full
    # forward): each logit carries ~1e-6 relative rounding through 2 layers of hidden 64 (O(10) magnitudes,
    # sums of 64-128 terms × 2^-24), so a log-prob may differ by a few 1e-6; 1e-4 leaves a 10x margin and
    # stays far below the gap a wrong mask makes (checked below: at least log(2) on a constrained choice).
    # the sampler's (KV-cached) log-probs vs a full forward: RECOMPUTE_ATOL's derivation, tests/support/float_bounds.py
    torch.testing.assert_close(recomputed[exp.action_mask], exp.old_log_probs[exp.action_mask], atol=1e-4, rtol=0)
    allowed = exp.allowed_tokens[:, 1:][exp.action_mask[:, 1:]]
    forced = (allowed >= 0).sum(-1) == 1
    assert forced.any() and torch.all(entropy[forced] == 0)  # exactly zero: one finite logit
    assert torch.all(exp.old_log_probs[:, 1:][exp.action_mask[:, 1:]][forced] == 0)  # log 1 exactly
    # The mask matters: without it the same tokens get visibly lower log-probs at constrained positions.
    constrained = (allowed >= 0).any(-1)
    gap = (recomputed - unmasked)[:, 1:][exp.action_mask[:, 1:]][constrained]
    assert torch.all(gap >= -1e-4) and gap.max() > math.log(2)


def test_trainer_iteration_under_the_constraint(tmp_path):
    from trainers.config import TrainConfig
    from trainers.loop import Trainer

    cfg = TrainConfig(
        algo="sapo",
        env="sapo/Vault-v0",
        iterations=1,
        episodes_per_iteration=4,
        max_response_tokens=8,
        prompt="plain",
        history_length=0,
        lr=1e-3,
        constrain="admissible",
        out_dir=str(tmp_path),
        progress=False,
        old_log_probs="rollout",
    )
    trainer = Trainer(cfg)
    row = trainer.run_iteration()
    assert math.isfinite(row["actor/loss"])
    with pytest.raises(ValueError, match="valid choices"):
        TrainConfig(constrain="trie")


def test_a_template_action_constrains_its_prefix_and_leaves_the_query_to_the_model(tiny_policy):
    """WebShop's ``search[<your query>]``: ``search[`` is forced like any action's tokens, the query is free (the
    constraint never writes ``<your query>``), and the clickables stay a trie."""
    tok = tiny_policy.tokenizer
    c = ConstraintBuilder(tok).build(["search[<your query>]", "click[back to search]", "click[b0a1]"])
    for t in _ids(tok, "<think>x</think><action>"):
        c.advance(t)
    assert set(c.allowed()) == {_ids(tok, "search[")[0], _ids(tok, "click[back to search]" + CLOSE_TAG)[0]}
    for t in _ids(tok, "search["):
        assert t in c.allowed()
        c.advance(t)
    assert c.allowed() is None  # the query and the rest of the turn are the model's
    for t in _ids(tok, "anything]</action>"):
        c.advance(t)
    assert c.allowed() is None
    clicks = ConstraintBuilder(tok).build(["search[<your query>]", "click[b0a1]"])
    for t in _ids(tok, "<action>click["):
        clicks.advance(t)
    assert clicks.allowed() is not None  # a click is still held to the page's clickables
    with pytest.raises(ValueError):
        clicks.advance(_ids(tok, "z")[0])
