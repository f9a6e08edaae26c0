"""``sapo/WebShop-v0``: WebShop in text mode, in-process (no HTTP on the hot path).

The observation is the page as verl-agent shows it to the model: WebShop's ``simple`` text
observation (visible texts joined by ``[SEP]``) after the instruction, each text quoted.
``info["simple_observation"]`` holds the full WebShop observation. Admissible actions are
``search[<your query>]`` where the page has a search box and ``click[<clickable>]`` for each
button, product id and option value. ``search[<your query>]`` is a template: any query of up to
500 characters without a line break, in any script, is admissible, and on every page but the
done page (WebShop's text env runs a search wherever it is issued).

``split`` names the goals (``catalog.GOAL_SPLITS``): ``test`` / ``train`` are WebShop's human
goals, ``verl-agent-test`` / ``verl-agent-train`` verl-agent's synthetic ones; ``catalog``
(``"1k"`` default, or ``"full"``) picks WebShop's product files. Both are in the spec. ``test_goals``
moves the cut between a goal set's test part and its train part (WebShop's 500; the spec records
another value).
``split="private"`` with ``private_seed=<hex>`` (and ``private_goals=N``, default 100) draws held-out
goals over the generated catalog from that secret (:mod:`sapo_gym.webshop.private`).

The episode ends with ``Buy Now``: ``info["score"]`` is WebShop's [0, 1] score of the purchase,
``won`` is ``score == 1.0`` and the reward is ``success_reward`` (default 10) on a win and 0
otherwise (verl-agent's rule); a purchase that is not a win is a terminal failure.
Inadmissible actions change nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from sapo_gym.core import TaskInfo, TextEnv, Turn
from sapo_gym.private import PRIVATE_SPLIT, check_seed
from sapo_gym.webshop.catalog import TEST_GOALS, Catalog, Goal, goal_split
from sapo_gym.webshop.dataset import DEFAULT_CATALOG, catalog_name, load_split_catalog
from sapo_gym.webshop.noun_table import catalog_noun_rule
from sapo_gym.webshop.private import DEFAULT_PRIVATE_GOALS, PRIVATE_GOALS, private_catalog
from sapo_gym.webshop.search import BM25S_VERSION, shared_index
from sapo_gym.webshop.shop import Page, ShopSession

__all__ = ["WebShopEnv", "REWARD_VERSION", "SHORT_CALL_PRODUCTS"]

REWARD_VERSION = "webshop-goal-v2"
"""v2: synthetic goals scored on (name, value) pairs, thefuzz's U+0080–U+00FF rule; the noun rule is ``nouns``."""

SHORT_CALL_PRODUCTS = 1_000
"""Catalogs up to this size have short calls (:meth:`WebShopEnv.calls_are_short`): a step of the 200-product
catalog takes about 0.25 ms, a search of the full 1.18 M-product one about 17 ms."""


class WebShopEnv(TextEnv):
    """WebShop in text mode (see the module docstring)."""

    env_name = "WebShop"
    fallback_chars = 20

    def __init__(
        self,
        *,
        data_dir: str | Path | None = None,
        catalog: str = DEFAULT_CATALOG,
        num_products: int | None = None,
        catalog_seed: int = 0,
        success_reward: float = 10.0,
        show_attrs: bool = False,
        split: str = "train",
        private_seed: str | None = None,
        private_goals: int = DEFAULT_PRIVATE_GOALS,
        test_goals: int = TEST_GOALS,
        protocol: str = "verl-agent-v1",
        render_mode: str | None = None,
    ):
        private = split == PRIVATE_SPLIT
        # the split names the goal set, its seed and its part
        self.goal_split = PRIVATE_GOALS if private else goal_split(split)
        if not isinstance(test_goals, int) or isinstance(test_goals, bool) or test_goals < 1:
            raise ValueError(f"test_goals must be a positive integer, got {test_goals!r}")
        self.test_goals = test_goals
        super().__init__(protocol=protocol, split=split, render_mode=render_mode)
        self.catalog_choice = catalog_name(data_dir, catalog)
        if private:
            if self.catalog_choice != "generated":
                raise ValueError("split='private' draws its goals over the generated catalog: leave data_dir unset")
            self.catalog: Catalog = private_catalog(check_seed(private_seed), private_goals, num_products, catalog_seed)
        else:
            self.catalog = load_split_catalog(
                split, data_dir, num_products=num_products, seed=catalog_seed, catalog=catalog
            )
        self.nouns = catalog_noun_rule(self.catalog)  # fixed here: the spec's rule is the one every purchase uses
        self.success_reward, self.show_attrs = float(success_reward), show_attrs
        self._goal_indices = range(len(self.catalog.goals)) if private else self.catalog.goal_indices(split, test_goals)
        self._ids = [f"goal-{i:05d}" for i in self._goal_indices]
        self.session: ShopSession | None = None

    @property
    def task_ids(self) -> Sequence[str]:
        return self._ids

    def _dataset_name(self) -> str:
        return f"webshop:{self.catalog.source}:{self.catalog.digest}"

    def spec_fields(self) -> dict[str, Any]:
        """The base fields plus the catalog choice and the split's goal set, seed and part."""
        fields = super().spec_fields()
        split = self.goal_split
        fields["catalog"] = self.catalog_choice
        fields["goals"] = {"set": split.goals, "seed": split.seed, "part": split.part}
        if self.test_goals != TEST_GOALS:  # WebShop's cut stays out, so the ids' hashes from before it are kept
            fields["goals"]["test_goals"] = self.test_goals
        return fields

    def calls_are_short(self) -> bool:
        """Small catalogs only: a search costs more with every product it scores (see :data:`SHORT_CALL_PRODUCTS`)."""
        return len(self.catalog.products) <= SHORT_CALL_PRODUCTS

    def backend_versions(self) -> dict[str, str]:
        try:
            stemmer = version("PyStemmer")
        except PackageNotFoundError:
            stemmer = "missing"
        # bm25s: the release whose scores the numpy index reproduces (the key of the boards' spec, not an import)
        return {"reward": REWARD_VERSION, "nouns": self.nouns.id, "bm25s": BM25S_VERSION, "PyStemmer": stemmer}

    def goal(self, index: int) -> Goal:
        """The goal of task ``task_ids[index]``."""
        return self.catalog.goals[self._goal_indices[index]]

    # ------------------------------------------------------------------ backend hooks
    def _new_session(self, goal: Goal) -> ShopSession:
        return ShopSession(self.catalog, shared_index(self.catalog), goal, self.nouns, show_attrs=self.show_attrs)

    def _load_task(self, index: int) -> tuple[TaskInfo, Turn]:
        goal = self.goal(index)
        self.session = self._new_session(goal)
        info = TaskInfo(
            task=goal.instruction_text, task_id=self._ids[index], task_type=goal.category, dataset=self._dataset_name()
        )
        return info, self._turn_of(self.session.render())

    def _backend_step(self, action: str) -> Turn:
        assert self.session is not None  # a purchase ends the episode (won or lost): TextEnv.step freezes it after
        self.session.step(action)
        return self._turn_of(self.session.render())

    def _turn_of(self, page: Page) -> Turn:
        assert self.session is not None
        extra: dict[str, Any] = {"simple_observation": page.simple_observation()}
        actions = page.available_actions()
        if self.session.outcome is None:
            return Turn(page.agent_observation(), actions, extra=extra)
        score = self.session.outcome.total
        won = score == 1.0
        extra["reward_breakdown"] = dataclasses.asdict(self.session.outcome)
        return Turn(
            page.agent_observation(),
            actions,
            won=won,
            lost=not won,
            score=score,
            reward=self.success_reward if won else 0.0,
            extra=extra,
        )

    def is_admissible(self, action: str) -> bool:
        """The listed actions, and any query the page's search box takes (the list shows ``search[<your query>]``)."""
        assert self.session is not None
        return super().is_admissible(action) or self.session.admissible(action)

    def expert_action(self) -> str | None:
        return self.session.oracle_action() if self.session is not None else None
