"""The machinery of the learning tests (``test_learning_<env>_<method>.py``, one slow test a file so that the two
xdist workers share them out): the statistic they assert, and the start their methods share
(``tests.support.learning``)."""

from __future__ import annotations

import secrets

import pytest

torch = pytest.importorskip("torch")

from tests.support.learning import Start, shared, starts_folder, z_rise  # noqa: E402


def test_z_statistic_by_hand():
    # 6/48 -> 24/48: pooled 0.3125, se = sqrt(0.3125 * 0.6875 * 2 / 48) = 0.094614, z = 0.375 / 0.094614 = 3.96347;
    # the hand value is rounded to 4 decimals (error <= 5e-5), hence abs=1e-4
    assert z_rise(6 / 48, 24 / 48, 48) == pytest.approx(3.9635, abs=1e-4)
    assert z_rise(0.5, 0.5, 48) == 0.0


def test_a_start_is_built_once_per_key_and_read_back_whole(tmp_path_factory):
    built = []

    def build(value: float) -> Start:
        built.append(value)
        return Start({"w": torch.full((2, 3), value)}, value / 4)

    key = {"run": secrets.token_hex(8)}  # this test's own entries, whatever else the session's folder holds
    first = shared(tmp_path_factory, "unit", key, lambda: build(1.0))
    again = shared(tmp_path_factory, "unit", key, lambda: build(2.0))
    other = shared(tmp_path_factory, "unit", {**key, "lr": 1}, lambda: build(3.0))
    assert built == [1.0, 3.0]
    assert torch.equal(again.state["w"], torch.full((2, 3), 1.0)) and again.success == first.success == 0.25
    assert torch.equal(other.state["w"], torch.full((2, 3), 3.0)) and other.success == 0.75
    assert not list(starts_folder(tmp_path_factory).glob(".*.tmp"))  # written whole: no temporary file left beside them
