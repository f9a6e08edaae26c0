"""The cache's files read with ``pread``: a sorted file searched through its fences as numpy searches the array."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sapo_gym.webshop import mapped
from sapo_gym.webshop.mapped import ArrayFile, SortedFile


@pytest.mark.parametrize("length", [0, 1, 3, 4, 5, 8, 9, 37, 400])
@pytest.mark.parametrize("dtype", [np.uint64, np.int64, "S10"])
def test_a_sorted_file_is_searched_as_numpy_searches_the_array(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, length: int, dtype: object
) -> None:
    monkeypatch.setattr(mapped, "FENCE_STRIDE", 4)  # many blocks; runs of equal keys cross their edges
    monkeypatch.setattr(mapped, "_FENCE_READ", 10)  # the fences sampled over several reads
    rng = np.random.default_rng(length)
    values = np.sort(rng.integers(0, 12, size=length)).astype(np.uint64)  # 12 values: long runs of repeats
    keys = values.astype(dtype) if dtype != "S10" else np.array([b"k%03d" % v for v in values], dtype="S10")
    np.save(tmp_path / "keys.npy", keys)
    found = SortedFile(tmp_path / "keys.npy")
    assert len(found) == length and np.array_equal(found.fences, keys[::4])
    probes = (
        [b"", b"z", *(b"k%03d" % v for v in range(14))]
        if dtype == "S10"
        else [np.array(v).astype(dtype) for v in range(14)] + [np.iinfo(dtype).min, np.iinfo(dtype).max]
    )
    for key in probes:  # below, between, at and above every key
        for side in ("left", "right"):
            assert found.searchsorted(key, side) == int(np.searchsorted(keys, key, side)), (key, side)


def test_an_array_file_reads_items_and_refuses_outside_it(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.arange(5, dtype=np.int64) * 10)
    array = ArrayFile(tmp_path / "a.npy")
    assert [int(array.item(i)) for i in (0, 4, -1, -5)] == [0, 40, 40, 0] and array.span(1) == (10, 20)
    for outside in (5, -6):
        with pytest.raises(IndexError):
            array.item(outside)
