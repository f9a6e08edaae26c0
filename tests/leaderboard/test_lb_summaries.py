"""Page views and comparisons use precomputed summaries: a submission's page paginates its episodes,
the viewer loads one chunk, /compare never parses a bundle and is cached, and the permutation
test's memory does not grow with the number of pairs."""

from __future__ import annotations

import copy
import re
import tracemalloc
from typing import Any

import pytest

import leaderboard.server.summaries as summaries
from leaderboard.paired_tests import paired_permutation
from leaderboard.seed import seed_store
from leaderboard.server.store import Store
from tests.support.leaderboard import body, named, refresh


def _seeds(bundle: dict[str, Any], n: int, name: str) -> dict[str, Any]:
    out = named(bundle, name)
    out["evaluation"]["seeds"] = list(range(n))
    out["episodes"] = [{**copy.deepcopy(ep), "seed": s} for s in range(n) for ep in bundle["episodes"]]
    return refresh(out)


@pytest.fixture
def no_bundle_parse(monkeypatch):  # type: ignore[no-untyped-def]
    def refuse(_row):  # type: ignore[no-untyped-def]
        raise AssertionError("a page parsed the whole bundle")

    monkeypatch.setattr(Store, "bundle_of", staticmethod(refuse))


def test_the_submission_page_paginates_episodes_from_the_summary(client, auth, random_bundle, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    sid = client.post("/api/v1/submissions", data=body(_seeds(random_bundle, 8, "many")), headers=auth).json[
        "id"
    ]  # 128 episodes
    monkeypatch.setattr(
        Store, "bundle_of", staticmethod(lambda _row: (_ for _ in ()).throw(AssertionError("parsed the bundle")))
    )
    first = client.get(f"/submission/{sid}").text
    links = re.findall(r'class="episode-link" href="/submission/\d+/episode/(\d+)"', first)
    assert links == [str(i) for i in range(100)] and "page 1 / 2" in first
    second = client.get(f"/submission/{sid}?page=2").text
    assert re.findall(r'class="episode-link" href="/submission/\d+/episode/(\d+)"', second) == [
        str(i) for i in range(100, 128)
    ]
    assert client.get(f"/submission/{sid}?page=99").status_code == 200  # clamped to the last page


def test_the_viewer_loads_one_chunk(client, auth, store, random_bundle, no_bundle_parse) -> None:  # type: ignore[no-untyped-def]
    bundle = _seeds(random_bundle, 8, "viewer")
    sid = client.post("/api/v1/submissions", data=body(bundle), headers=auth).json["id"]
    for index in (0, summaries.CHUNK - 1, summaries.CHUNK, 127):
        ep = bundle["episodes"][index]
        page = client.get(f"/submission/{sid}/episode/{index}?step=1").text
        assert f'data-steps="{ep["steps"]}"' in page and ep["turns"][0]["observation"] in page, index
    assert client.get(f"/submission/{sid}/episode/128").status_code == 404


def test_rows_stored_without_the_api_get_their_summary_on_first_view(client, store, boards) -> None:  # type: ignore[no-untyped-def]
    sid = seed_store(store, boards, ["random"])[0]  # store.add directly: no summary yet
    assert client.get(f"/submission/{sid}").status_code == 200
    assert client.get(f"/submission/{sid}/episode/3").status_code == 200


def test_compare_uses_summaries_and_is_cached(client, auth, expert_bundle, random_bundle, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    a = client.post("/api/v1/submissions", data=body(expert_bundle), headers=auth).json["id"]
    b = client.post("/api/v1/submissions", data=body(random_bundle), headers=auth).json["id"]
    calls = []
    real = summaries.compare_bundles
    monkeypatch.setattr(summaries, "compare_bundles", lambda x, y: calls.append(1) or real(x, y))
    monkeypatch.setattr(
        Store, "bundle_of", staticmethod(lambda _row: (_ for _ in ()).throw(AssertionError("parsed the bundle")))
    )
    api = client.get(f"/api/v1/compare?a={a}&b={b}").json
    page = client.get(f"/compare?a={a}&b={b}").text
    again = client.get(f"/api/v1/compare?a={a}&b={b}").json
    assert api == again and api["test"]["pairs"] == 16 and "mcnemar-p" in page
    assert len(calls) == 1


def test_the_permutation_test_memory_does_not_grow_with_the_pairs() -> None:
    a = [float(i % 7) / 7 for i in range(20_000)]
    b = [float(i % 5) / 5 for i in range(20_000)]
    tracemalloc.start()
    try:
        p = paired_permutation(a, b, rounds=2_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert 0 < p <= 1
    assert peak < 64 << 20, peak / 2**20  # 2,048 x 20,000 signs at a time would be 2 x 312 MiB
