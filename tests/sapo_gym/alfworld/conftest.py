"""Fixtures for the ALFWorld tests: the official train split extracted from its tarball."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def train_data(alfworld_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The official train split extracted from the tarball into a temporary root (json_2.1.1/train)."""
    tarball = alfworld_data / "json_2.1.1-train.tar.xz"
    if not tarball.is_file():
        pytest.skip("json_2.1.1-train.tar.xz not found")
    root = tmp_path_factory.mktemp("alfworld_train")
    with tarfile.open(tarball, "r:xz") as tar:
        members = [m for m in tar if m.name.startswith("json_2.1.1/train/") and m.isreg()]
        tar.extractall(root, members=members, filter="data")
    return root
