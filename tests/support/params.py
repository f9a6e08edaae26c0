"""Parameter snapshots for tests that ask whether an update moved a model."""

from __future__ import annotations

import torch


def snapshot(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A copy of every trainable parameter, by name."""
    return {n: p.detach().clone() for n, p in module.named_parameters() if p.requires_grad}


def unchanged(before: dict[str, torch.Tensor], module: torch.nn.Module) -> list[str]:
    """The names of ``before`` whose parameter in ``module`` is still bit-equal."""
    return [n for n, p in module.named_parameters() if n in before and torch.equal(before[n], p.detach())]


def moved(before: dict[str, torch.Tensor], module: torch.nn.Module) -> bool:
    """Whether any parameter of ``before`` changed."""
    return len(unchanged(before, module)) < len(before)
