"""Pages as WebShop's templates render them: the results pager, empty sub-pages, reviews."""

from __future__ import annotations

from pathlib import Path

import pytest

from sapo_gym.webshop.catalog import Catalog
from sapo_gym.webshop.nouns import OFFLINE
from sapo_gym.webshop.search import SearchIndex
from sapo_gym.webshop.shop import NEXT_PAGE, PREV_PAGE, ShopSession


@pytest.fixture
def shop(tmp_path: Path, make_product, make_goal):
    mugs = [
        make_product(asin=f"B000MUG{i:03d}", title=f"Blue Mug {i}", options={}, bullet_points=["Glazed"])
        for i in range(23)
    ]
    bare = make_product(asin="B000BARE01", title="Bare Lamp", bullet_points=[], description="", options={})
    reviewed = make_product(
        asin="B000REVD01",
        title="Reviewed Lamp",
        options={},
        reviews=[{"title": "Bright", "score": 4, "body": "Lights the room."}, {"title": "Dim", "score": 2}],
    )
    products = [*mugs, bare, reviewed]
    catalog = Catalog(
        products=products,
        prices={p.asin: 15.0 for p in products},
        goals=[make_goal()],
        source="pages",
        digest="pages-test",
    )
    return lambda: ShopSession(catalog, SearchIndex(catalog, cache_dir=tmp_path), catalog.goals[0], OFFLINE)


def _buttons(session: ShopSession) -> list[str]:
    return [e.text for e in session.render().elements if e.kind == "button"]


def test_next_is_on_every_results_page_prev_from_page_two(shop) -> None:
    s = shop()
    assert s.step("search[blue mug]") and len(s.results) == 23
    pages = []
    for _ in range(4):  # pages 1-3 hold 10 + 10 + 3 mugs; page 4 is past the end, as WebShop renders it: empty
        pages.append((s.page_no, _buttons(s), sum(e.kind == "link" for e in s.render().elements)))
        assert s.step(f"click[{NEXT_PAGE.lower()}]")
    assert pages == [
        (1, ["Back to Search", NEXT_PAGE], 10),
        (2, ["Back to Search", PREV_PAGE, NEXT_PAGE], 10),
        (3, ["Back to Search", PREV_PAGE, NEXT_PAGE], 3),
        (4, ["Back to Search", PREV_PAGE, NEXT_PAGE], 0),
    ]
    assert "Page 5 (Total results: 23)" in s.render().texts


@pytest.mark.parametrize("sub_page", ["features", "reviews", "description"])
def test_empty_sub_pages_show_nothing_but_navigation(shop, sub_page: str) -> None:
    s = shop()
    s.step("search[bare lamp]")
    assert s.step("click[b000bare01]") and s.step(f"click[{sub_page}]")
    assert s.render().texts == ["Instruction:", s.goal.instruction_text, "Back to Search", PREV_PAGE]


def test_reviews_show_the_quoted_title_the_score_and_the_body(shop) -> None:
    s = shop()
    s.step("search[reviewed lamp]")
    s.step("click[b000revd01]")
    s.step("click[reviews]")
    assert s.render().texts[4:] == ['"Bright"', "4", "Lights the room.", '"Dim"', "2"]
