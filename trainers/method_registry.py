"""The methods ``--algo`` names, one table: what the CLI, the config, compare and the docs know of each.

Like the envs' :data:`sapo_gym.registration.ENVS`, each :class:`MethodEntry` names its class by a string entry
point, imported only when a trainer is built, so ``trainers.config`` and ``sapo-gym train --help`` load no torch.
:data:`trainers.config.ALGOS` and :data:`~trainers.config.GROUP_ALGOS`, the ``--algo`` choices and help, the
group methods' default G, compare's labels and figure colours and :func:`trainers.methods.make_method` all read
this table. Adding a method is one module under ``trainers/methods/`` and one line here (docs/training.md,
"Adding a method"); ``tests/trainers/test_method_registry.py`` fails on a method registered halfway.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

__all__ = ["GROUP_SIZE", "METHODS", "TAU_ABLATIONS", "MethodEntry", "describe_methods", "method_label"]

GROUP_SIZE = 8
"""Rollouts per task G of a group method when ``--group-size`` is 0 (the paper's and verl-agent's 8)."""


@dataclass(frozen=True)
class MethodEntry:
    """One method of ``sapo-gym train --algo`` / ``sapo-gym compare --algos``."""

    name: str
    """The ``--algo`` value, the key of the method's runs (``sapo-seed0``) and of results.json."""
    label: str
    """The name in tables, figures and leaderboard bundles (``GiGPO``, not ``GIGPO``)."""
    entry_point: str
    """``module:Class`` of its :class:`~trainers.methods.base.Method` subclass (imported only by :meth:`load`)."""
    summary: str
    """One line on what sets it apart, shown in ``--algo``'s and ``--algos``' help."""
    group: bool = False
    """Whether it plays G rollouts per task and baselines each against its group (G = :data:`GROUP_SIZE` by
    default; compare gives these methods ``--grpo-group-size``), else one rollout per task."""
    reference: str = ""
    """Where the method comes from (paper, implementation it follows)."""
    colour: str = ""
    """Its colour in compare's figures (matplotlib's next colour when empty)."""
    settings: tuple[tuple[str, Any], ...] = ()
    """TrainConfig values the entry fixes: an ablation that changes one constant of a method's equations is that
    method's class under another name with the constant set (``sapo-tau0.1``: SAPO's class, ``tau_v`` 0.1).
    :class:`~trainers.config.TrainConfig` takes them when ``--algo`` names the entry and refuses another value given
    for them."""

    @property
    def default_group_size(self) -> int:
        """Rollouts per task when ``--group-size`` is 0."""
        return GROUP_SIZE if self.group else 1

    def load(self) -> Any:
        """What the entry point names (imports its module, hence torch); :func:`trainers.methods.method_class`
        also checks that it is a ``Method`` subclass."""
        module, _, attr = self.entry_point.partition(":")
        return getattr(importlib.import_module(module), attr)


TAU_ABLATIONS = (0.1, 0.3, 3.0)
"""The readout temperatures of the ``sapo-tau*`` ablations, half-decade steps around SAPO's τ_v = 1. V reaches ±R_max
at a logit gap ``z_{w+} − z_{w−}`` of ±τ_v: at 0.1 a gap of the size a single update moves saturates it (and the clip
stops its gradient), at 3 it needs gaps beyond the ones the warm start's readout rows show; the range between is
the one the readout supports without either."""
_SAPO, _ABL = "trainers.methods.sapo:SAPO", "trainers.methods.sapo_ablations"
_TAU_COLOURS = ("#bcbd22", "#17becf", "#393b79")

METHODS: dict[str, MethodEntry] = {
    e.name: e
    for e in (
        MethodEntry(
            "sapo",
            "SAPO",
            "trainers.methods.sapo:SAPO",
            "value readout from the policy's own logits",
            reference="arXiv 2608.19842",
            colour="#1f77b4",
        ),
        MethodEntry(
            "ppo",
            "PPO",
            "trainers.methods.ppo:PPO",
            "separate critic",
            reference="Schulman et al. 2017, arXiv 1707.06347",
            colour="#d62728",
        ),
        MethodEntry(
            "grpo",
            "GRPO",
            "trainers.methods.grpo:GRPO",
            "group baseline",
            group=True,
            reference="Shao et al. 2024, arXiv 2402.03300; verl-agent",
            colour="#2ca02c",
        ),
        MethodEntry(
            "gigpo",
            "GiGPO",
            "trainers.methods.gigpo:GiGPO",
            "GRPO's episode term plus an anchor-state step term",
            group=True,
            reference="Feng et al. 2025, arXiv 2505.10978; verl-agent",
            colour="#9467bd",
        ),
        MethodEntry(
            "rloo",
            "RLOO",
            "trainers.methods.rloo:RLOO",
            "leave-one-out group baseline",
            group=True,
            reference="Kool et al. 2019; Ahmadian et al. 2024, arXiv 2402.14740",
            colour="#ff7f0e",
        ),
        # SAPO's ablations (trainers/methods/sapo_ablations.py; --preset ablation compares them)
        MethodEntry(
            "sapo-noq",
            "SAPO-noQ",
            _SAPO,
            "ablation: SAPO without its Q loss (c_Q = 0)",
            settings=(("q_coef", 0.0),),
            colour="#8c564b",
        ),
        MethodEntry(
            "sapo-nonorm",
            "SAPO-noNorm",
            f"{_ABL}:SAPONoNorm",
            "ablation: SAPO without batch-normalized advantages",
            colour="#e377c2",
        ),
        MethodEntry(
            "sapo-qv",
            "SAPO-QV",
            f"{_ABL}:SAPOQMinusV",
            "ablation: SAPO with A = Q - V in place of GAE",
            colour="#7f7f7f",
        ),
        *(
            MethodEntry(
                f"sapo-tau{t:g}",
                f"SAPO-tau{t:g}",
                _SAPO,
                f"ablation: SAPO's readout at tau_v = {t:g}",
                settings=(("tau_v", t),),
                colour=colour,
            )
            for t, colour in zip(TAU_ABLATIONS, _TAU_COLOURS)
        ),
        MethodEntry(
            "sapo-head",
            "SAPO-head",
            f"{_ABL}:SAPOHead",
            "control: V and Q from a linear head on the same hidden states, not two vocabulary logits",
            colour="#000000",
        ),
    )
}
"""Every method, by ``--algo`` name, in the order the CLI lists them."""


def method_label(algo: str) -> str:
    """A method's name in tables and figures (``GiGPO``); an unregistered name as it is."""
    entry = METHODS.get(algo)
    return entry.label if entry is not None else algo


def describe_methods() -> str:
    """``sapo (value readout ...), ppo (separate critic), ...``: the methods for ``--help``."""
    return ", ".join(f"{e.name} ({e.summary})" for e in METHODS.values())
