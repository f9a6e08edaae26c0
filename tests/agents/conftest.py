"""Fixtures for the agent tests: the tiny random-init policy and a logit-steering hook."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def tiny_policy():
    from agents.policy import PolicyModel

    return PolicyModel.tiny(seed=0)


@contextlib.contextmanager
def steer_logits(policy, edit: Callable[[Any, Any], None]) -> Iterator[None]:
    """Run ``edit(logits (B, T, V), position_ids (B, T))`` in place on every forward of ``policy.model``."""
    import torch

    def hook(module, args, kwargs, output):
        positions = kwargs.get("position_ids")
        if positions is None:
            positions = torch.arange(output.logits.shape[1]).expand(output.logits.shape[:2])
        edit(output.logits, positions[:, -output.logits.shape[1] :])
        return output

    handle = policy.model.register_forward_hook(hook, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


@pytest.fixture
def steer():
    """The :func:`steer_logits` context manager."""
    return steer_logits
