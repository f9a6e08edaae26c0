"""WebShop test fixtures: a private search-index cache and small hand-made catalog records."""

from __future__ import annotations

import pytest

from sapo_gym.webshop.catalog import Goal, Product


@pytest.fixture(autouse=True, scope="session")
def _private_index_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep the BM25 index cache of the tests out of the user's ~/.cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("SAPO_GYM_CACHE", str(tmp_path_factory.mktemp("sapo_cache")))
    yield
    mp.undo()


def _product(**overrides: object) -> Product:
    fields: dict[str, object] = dict(
        asin="B000TSHIRT",
        title="Acme Cotton Men's T-Shirt, Black",
        category="fashion",
        query="men's t-shirt",
        product_category="Clothing › Men › Shirts",
        pricing=(15.0,),
        price_tag="$15.0",
        options={"color": ["black", "navy blue"], "size": ["small", "large"]},
        attributes=["machine wash", "short sleeve"],
        bullet_points=["Crew neck"],
        description="A classic fit tee.",
    )
    fields.update(overrides)
    return Product(**fields)  # type: ignore[arg-type]


def _goal(**overrides: object) -> Goal:
    fields: dict[str, object] = dict(
        asin="B000TSHIRT",
        category="fashion",
        query="men's t-shirt",
        name="Acme Cotton Men's T-Shirt, Black",
        product_category="Clothing › Men › Shirts",
        instruction_text="i want a t-shirt",
        price_upper=20.0,
        attributes=["machine wash", "classic fit", "waterproof"],
        goal_options=["black", "xx-large"],
    )
    fields.update(overrides)
    return Goal(**fields)  # type: ignore[arg-type]


@pytest.fixture
def make_product():
    """Build a :class:`Product` (a black cotton t-shirt) with fields overridden."""
    return _product


@pytest.fixture
def make_goal():
    """Build a :class:`Goal` for that t-shirt with fields overridden."""
    return _goal
