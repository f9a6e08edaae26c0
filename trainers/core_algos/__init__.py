"""Pure math of the methods over padded tensors and masks (verl's ``core_algos``, as a package).

``masked`` (masked statistics, :func:`group_stats`: the one group-statistics helper, the turn grid),
``advantages`` (GAE, SARSA, SAPO's normalization), ``group`` (the group estimators and their inputs: scores and
entries, GRPO, RLOO's leave-one-out baseline, GiGPO's episode + anchor-state step advantage) and ``losses``
(log-probs, entropy, the clipped losses, KL); everything is importable from here. Plain-Python references of the
estimators, for the equivalence tests only, are in ``tests/support/core_algos_reference.py``.

Every function here is stateless, typed and shape-documented; none touches a model, an env or a
config object, so each can be tested with a few hand-computed numbers. Shapes:

- ``B``: turns in a batch (one row per env turn, verl-agent layout), ``T``: padded token length,
  ``V``: vocabulary size.
- ``N``: trajectories, ``H``: the longest trajectory in turns. Turn-level recursions (GAE, SARSA)
  run on an ``(N, H)`` grid built by :func:`scatter_turns` and are read back with
  :func:`gather_turns`, so that batching, shuffling and padding never mix two trajectories.

Masks are ``bool``; values at masked-out positions never influence a result (they may even be
``nan`` or ``inf``). SAPO equations follow the paper (arXiv 2608.19842, eqs. 1-12); the GRPO
"statistics across steps" variant follows verl-agent's ``compute_mean_std_cross_steps``; GiGPO follows
arXiv 2505.10978 and verl-agent's ``gigpo/core_gigpo.py``, RLOO Kool et al. 2019 / Ahmadian et al. 2024.
"""

from trainers.core_algos.advantages import normalize_turn_advantages, sarsa_targets, turn_gae, turn_targets
from trainers.core_algos.group import (
    anchor_advantages,
    discounted_returns,
    equal_return_groups,
    gigpo_advantages,
    group_entries,
    grpo_advantages,
    rloo_advantages,
    trajectory_returns,
    turn_scores,
)
from trainers.core_algos.losses import (
    AggMode,
    KLKind,
    aggregate_loss,
    clipped_policy_loss,
    clipped_value_loss,
    entropy_from_logits,
    explained_variance,
    kl_penalty,
    token_log_probs,
)
from trainers.core_algos.masked import (
    GroupStats,
    gather_turns,
    group_index,
    group_stats,
    group_sum,
    masked_mean,
    masked_var,
    scatter_turns,
)

__all__ = [
    "masked_mean",
    "masked_var",
    "group_index",
    "group_sum",
    "GroupStats",
    "group_stats",
    "scatter_turns",
    "gather_turns",
    "turn_gae",
    "sarsa_targets",
    "normalize_turn_advantages",
    "turn_targets",
    "trajectory_returns",
    "turn_scores",
    "group_entries",
    "equal_return_groups",
    "grpo_advantages",
    "rloo_advantages",
    "discounted_returns",
    "anchor_advantages",
    "gigpo_advantages",
    "token_log_probs",
    "entropy_from_logits",
    "clipped_policy_loss",
    "clipped_value_loss",
    "explained_variance",
    "kl_penalty",
    "aggregate_loss",
    "AggMode",
    "KLKind",
]
