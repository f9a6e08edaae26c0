"""Server-rendered pages: the board (sorting, CIs, categories, badges), a submission, the viewer, a comparison."""

from __future__ import annotations

import copy
import re

import pytest

from leaderboard.paired_comparison import compare_bundles
from leaderboard.seed import seed_store
from leaderboard.server.worker import Verifier
from sapo_gym.bundle import BundleError


@pytest.fixture
def seeded(store, boards):  # type: ignore[no-untyped-def]
    ids = seed_store(store, boards)
    Verifier(store).drain()
    return dict(zip(("expert", "random"), ids))


def _agents(html: str) -> list[str]:
    return re.findall(r'<td class="agent"><a href="/submission/\d+">([^<]+)</a>', html)


def test_board_table_sorts_and_shows_cis_categories_badges(client, seeded, vault_board) -> None:  # type: ignore[no-untyped-def]
    url = f"/board/{vault_board.spec_hash}"
    assert client.get("/").status_code == 302  # a single board: straight to it
    page = client.get(url).text
    assert _agents(page) == ["expert (oracle)", "random (admissible)"]
    assert page.count("&#10003; verified") == 2 and '<th class="num cat">code2</th>' in page
    assert '<b>100.0</b> <span class="ci">[80.6, 100.0]</span>' in page  # Wilson interval of 16/16
    assert _agents(client.get(url + "?sort=success&order=asc").text) == ["random (admissible)", "expert (oracle)"]
    assert _agents(client.get(url + "?sort=agent&order=desc").text) == ["random (admissible)", "expert (oracle)"]
    assert _agents(client.get(url + "?sort=bogus").text) == ["expert (oracle)", "random (admissible)"]
    assert client.get("/board/ffffffffffffffff").status_code == 404


def test_submission_page_has_category_plot_and_episodes(client, seeded) -> None:  # type: ignore[no-untyped-def]
    page = client.get(f"/submission/{seeded['random']}").text
    assert page.count("<svg") == 2 and 'class="label">code2</text>' in page and 'class="label">all</text>' in page
    assert page.count('class="episode-link"') == 16
    assert f'<option value="{seeded["expert"]}">expert (oracle) (#{seeded["expert"]})</option>' in page  # compare form


def test_trajectory_viewer_shows_think_action_observation_per_step(client, seeded, store) -> None:  # type: ignore[no-untyped-def]
    bundle = store.bundle_of(store.get(seeded["expert"]))
    ep = bundle["episodes"][3]
    page = client.get(f"/submission/{seeded['expert']}/episode/3?step=1").text
    assert f'data-steps="{ep["steps"]}" data-step="1"' in page
    sections = re.findall(r'<section class="turn" data-step="(\d+)" (hidden)?', page)
    assert [(int(s), bool(h)) for s, h in sections] == [(k, k != 1) for k in range(ep["steps"] + 1)]
    assert (
        ep["turns"][0]["action"] in page and ep["turns"][0]["think"] in page and ep["turns"][0]["observation"] in page
    )
    assert client.get(f"/submission/{seeded['expert']}/episode/99").status_code == 404


def test_compare_page_runs_paired_tests(client, seeded) -> None:  # type: ignore[no-untyped-def]
    page = client.get(f"/compare?a={seeded['expert']}&b={seeded['random']}").text
    api = client.get(f"/api/v1/compare?a={seeded['expert']}&b={seeded['random']}").json
    t = api["test"]
    assert t["pairs"] == 16 and t["only_b"] == 0 and t["only_a"] == 16 - round(16 * t["success_b"])
    assert t["mcnemar_p"] == pytest.approx(2 / 2 ** t["only_a"])
    assert f'<td class="num" id="mcnemar-p">{t["mcnemar_p"]:.4g}</td>' in page
    assert "differ significantly" in page
    assert api["categories"]["code2"] == t  # Vault's test split has a single task type
    assert '<table class="board stats" id="categories">' in page and "<td>code2</td>" in page


def test_compare_needs_the_same_board_and_shared_tasks(expert_bundle, random_bundle) -> None:  # type: ignore[no-untyped-def]
    other = copy.deepcopy(random_bundle)
    other["env"]["spec_hash"] = "ffffffffffffffff"
    with pytest.raises(BundleError, match="different boards"):
        compare_bundles(expert_bundle, other)
    for ep in random_bundle["episodes"]:
        ep["seed"] = 5
    with pytest.raises(BundleError, match="share no"):
        compare_bundles(expert_bundle, random_bundle)
