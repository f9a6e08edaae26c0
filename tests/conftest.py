"""Shared fixtures. Markers: slow, gpu, needs_data, browser (see pyproject.toml)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import alfworld as support_alfworld  # first: it reads $ALFWORLD_DATA before any `import alfworld`

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _alfworld_data_var_as_the_user_set_it():
    """``import alfworld`` (at collection too: a module-level ``importorskip``) sets $ALFWORLD_DATA to its cache when
    unset, once per process; every test sees the variable as the run was started with, whatever ran before it in
    this worker (a leaked value sent the light install's ALFWorld-v0 to a cache with no games)."""
    support_alfworld.restore_data_var()
    yield
    support_alfworld.restore_data_var()


@pytest.fixture(scope="session")
def alfworld_data() -> Path:
    """Root holding json_2.1.1/{valid_seen,valid_unseen} (and maybe the train tarball); skips when absent."""
    path = support_alfworld.find_data()
    if path is None:
        pytest.skip("real ALFWorld data not found (set ALFWORLD_DATA)")
    return path


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files that hold a ``slow`` test first (each file's tests in their order), then gpu tests skip without CUDA.

    ``make test`` deals whole files to two workers in this order (``--dist loadfile --no-loadscope-reorder``), each
    worker taking the next file when it is done: the long files start first and the many short ones fill in the
    end, so the workers finish close together instead of one running a long file alone at the end."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable
    _skip_gpu_tests_without_cuda(items)


def _skip_gpu_tests_without_cuda(items: list[pytest.Item]) -> None:
    import importlib.util

    has_cuda = False
    if importlib.util.find_spec("torch") is not None and any("gpu" in i.keywords for i in items):
        import torch

        has_cuda = torch.cuda.is_available()
    for item in items:
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))
