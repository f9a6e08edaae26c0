"""Shared fixtures. Markers: slow, gpu, needs_data, browser (see pyproject.toml)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _alfworld_data() -> Path | None:
    """Real ALFWorld games: $ALFWORLD_DATA, else ../shared/data/alfworld beside the checkout."""
    candidates = [os.environ.get("ALFWORLD_DATA"), Path(__file__).resolve().parents[2] / "shared/data/alfworld"]
    for c in candidates:
        if c and (Path(c) / "json_2.1.1" / "valid_seen").is_dir():
            return Path(c)
    return None


@pytest.fixture(scope="session")
def alfworld_data() -> Path:
    """Root holding json_2.1.1/{valid_seen,valid_unseen} (and maybe the train tarball); skips when absent."""
    path = _alfworld_data()
    if path is None:
        pytest.skip("real ALFWorld data not found (set ALFWORLD_DATA)")
    return path


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import importlib.util

    has_cuda = False
    if importlib.util.find_spec("torch") is not None and any("gpu" in i.keywords for i in items):
        import torch

        has_cuda = torch.cuda.is_available()
    for item in items:
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))
