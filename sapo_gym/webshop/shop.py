"""The shop's state machine, shared by the text env, the flask app and the browser env.

A :class:`ShopSession` is one customer's visit: a goal, the current page, the search keywords,
the product being viewed and the options chosen. :meth:`ShopSession.step` executes one action
of WebShop's grammar (``search[<query>]``, ``click[<clickable>]`` for a button, a product id or
an option value) with the transitions of WebShop's text env (``web_agent_text_env.py``):

* ``search[<query>]`` runs the search from any page (WebShop's text env executes a search
  wherever it is issued; only the search page *shows* a search box, so only it lists
  ``search[<your query>]``);
* ``Back to Search`` → the search page; ``Next >`` (on every results page, as WebShop's template
  shows it; past the last page the list is empty) / ``< Prev`` (from page 2) page through the results;
  ``< Prev`` on an item page goes back to the results, on a sub-page back to the item;
* a product id opens its item page (no options chosen); an option value sets that option;
* ``Description`` / ``Features`` / ``Reviews`` (/ ``Attributes``) open a sub-page;
* ``Buy Now`` computes the reward (:mod:`sapo_gym.webshop.reward`) and ends the visit.

An action that is not admissible on the current page changes nothing. Every page renders to a
:class:`Page` (a flat list of elements), from which both the text observation and the HTML are
derived, so the two modes show the same content.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Literal

from sapo_gym.webshop.catalog import Catalog, Goal
from sapo_gym.webshop.nouns import NounRule
from sapo_gym.webshop.reward import RewardBreakdown, normalize_color, purchase_reward, token_set_ratio
from sapo_gym.webshop.search import SearchIndex

__all__ = [
    "Element",
    "Page",
    "ShopSession",
    "parse_shop_action",
    "accepts",
    "agent_observation",
    "simple_observation",
    "available_actions",
    "valid_query",
    "PRODUCT_WINDOW",
    "MAX_QUERY_CHARS",
    "BACK_TO_SEARCH",
    "NEXT_PAGE",
    "PREV_PAGE",
    "BUY_NOW",
    "SUB_PAGES",
]

PRODUCT_WINDOW = 10
MAX_QUERY_CHARS = 500
BACK_TO_SEARCH, NEXT_PAGE, PREV_PAGE, BUY_NOW = "Back to Search", "Next >", "< Prev", "Buy Now"
SUB_PAGES = ("Description", "Features", "Reviews", "Attributes")
_ACTION = re.compile(r"(search|click)\[(.+)\]", re.S)

Kind = Literal["text", "button", "link", "option", "search"]
PageKind = Literal["search", "results", "item", "sub", "done"]
_CLICK_RANK = {"button": 0, "link": 1, "option": 2}


@dataclass(frozen=True)
class Element:
    """One visible piece of a page."""

    kind: Kind
    text: str
    """What is shown (the search box shows its button's label, ``Search``)."""
    key: str = ""
    """For clickables: what ``click[...]`` names (lower-case button text, lower-case asin, option value)."""
    group: str = ""
    """For options: the option's name (e.g. ``color``)."""


@dataclass(frozen=True)
class Page:
    """A rendered page: its kind and its elements in document order."""

    kind: PageKind
    elements: tuple[Element, ...]
    instruction: str

    @property
    def has_search_bar(self) -> bool:
        return any(e.kind == "search" for e in self.elements)

    @property
    def clickables(self) -> list[str]:
        """Keys of the clickables, WebShop's order: buttons, then product links, then options."""
        ranked = sorted((e for e in self.elements if e.kind in _CLICK_RANK), key=lambda e: _CLICK_RANK[e.kind])
        return list(dict.fromkeys(e.key for e in ranked))

    @property
    def texts(self) -> list[str]:
        """Visible texts in document order (WebShop's ``simple`` observation splits these by ``[SEP]``)."""
        return [t for t in (e.text.strip() for e in self.elements) if t]

    def simple_observation(self) -> str:
        return simple_observation(self.texts)

    def agent_observation(self) -> str:
        return agent_observation(self.texts, self.instruction)

    def available_actions(self) -> list[str]:
        return available_actions(self.has_search_bar, self.clickables)


def simple_observation(texts: list[str]) -> str:
    """WebShop's ``text`` observation: every visible text joined by `` [SEP] ``."""
    return " [SEP] ".join(texts)


def agent_observation(texts: list[str], instruction: str) -> str:
    """What verl-agent shows the model: the texts after the instruction, each quoted, joined by `` [SEP] ``."""
    instruction = instruction.strip()
    start = texts.index(instruction) + 1 if instruction in texts else 0
    return " [SEP] ".join(f"'{t}'" for t in texts[start:])


def available_actions(has_search_bar: bool, clickables: list[str]) -> list[str]:
    """verl-agent's rendering: ``search[<your query>]`` when there is a search box, ``click[...]`` per clickable."""
    return (["search[<your query>]"] if has_search_bar else []) + [f"click[{c}]" for c in clickables]


def accepts(action: str, clickables: list[str]) -> bool:
    """Whether a page (not the done page) with these clickables admits ``action``: any valid search, or a clickable."""
    parsed = parse_shop_action(action)
    if parsed is None:
        return False
    verb, arg = parsed
    return valid_query(arg) if verb == "search" else arg in clickables


def parse_shop_action(action: str) -> tuple[str, str] | None:
    """``"click[Buy Now]"`` → ("click", "buy now"); None when it is not of the grammar.

    A click's argument is stripped; a search's is kept as written (lower-cased), as WebShop's text env keeps it.
    """
    m = _ACTION.fullmatch(action.strip())
    if not m:
        return None
    arg = m.group(2).lower()
    return (m.group(1), arg if m.group(1) == "search" else arg.strip())


def valid_query(query: str) -> bool:
    """A query the shop runs: 1 to :data:`MAX_QUERY_CHARS` characters, any script, no line break.

    WebShop runs any non-empty query (its action pattern's ``.`` stops at ``\\n``); the length cap is
    ours (Lucene refuses queries of over 1,024 terms), and so is refusing ``\\r`` (a form submission
    turns it into a line break, so the browser mode could not send it unchanged).
    """
    return 0 < len(query) <= MAX_QUERY_CHARS and "\n" not in query and "\r" not in query


@dataclass
class ShopSession:
    """One customer's visit (see the module docstring)."""

    catalog: Catalog
    index: SearchIndex
    goal: Goal
    nouns: NounRule
    """The type reward's noun rule, fixed by whoever made the session (the env, the app) at its construction."""
    show_attrs: bool = False
    kind: PageKind = "search"
    keywords: str = ""
    results: list[str] = field(default_factory=list)
    page_no: int = 1
    asin: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    sub_page: str = ""
    searched: list[str] = field(default_factory=list)
    outcome: RewardBreakdown | None = None

    # ------------------------------------------------------------------ actions
    def admissible(self, action: str) -> bool:
        if self.kind == "done":
            return False
        return accepts(action, self.render().clickables)

    def step(self, action: str) -> bool:
        """Execute ``action`` if admissible (else change nothing); True when it was executed."""
        if not self.admissible(action):
            return False
        verb, arg = parse_shop_action(action)  # type: ignore[misc]
        if verb == "search":
            self._search(arg)
        else:
            self._click(arg)
        return True

    def _search(self, query: str) -> None:
        self.keywords, self.results, self.page_no = query, self.index.search(query), 1
        self.searched.append(query)
        self.kind, self.asin, self.options = "results", None, {}

    def _click(self, key: str) -> None:
        if key == BACK_TO_SEARCH.lower():
            self.kind, self.keywords, self.results, self.asin, self.options = "search", "", [], None, {}
        elif key == BUY_NOW.lower():
            self._buy()
        elif key == NEXT_PAGE.lower():
            self.page_no += 1
        elif key == PREV_PAGE.lower():
            if self.kind == "results":
                self.page_no -= 1
            else:  # a sub-page goes back to its item, an item page back to the results
                self.kind = "item" if self.kind == "sub" else "results"
        elif self.kind == "results":
            self.asin, self.options, self.kind = key.upper(), {}, "item"
        elif key in (s.lower() for s in SUB_PAGES):
            self.kind, self.sub_page = "sub", key.capitalize()
        else:  # an option value
            product = self.catalog.by_asin[self.asin or ""]
            for name, values in product.options.items():
                if key in values:
                    self.options[name] = key
                    break

    def _buy(self) -> None:
        assert self.asin is not None
        product = self.catalog.by_asin[self.asin]
        self.outcome = purchase_reward(product, self.goal, self.catalog.prices[self.asin], self.options, self.nouns)
        self.kind = "done"

    @property
    def score(self) -> float:
        return self.outcome.total if self.outcome is not None else 0.0

    # ------------------------------------------------------------------ rendering
    def render(self) -> Page:
        head = [Element("text", "Instruction:"), Element("text", self.goal.instruction_text)]
        nav = [Element("button", BACK_TO_SEARCH, BACK_TO_SEARCH.lower())]
        prev = Element("button", PREV_PAGE, PREV_PAGE.lower())
        if self.kind == "search":
            body = [Element("text", "WebShop"), *head, Element("search", "Search")]
        elif self.kind == "results":
            body = [*head, *nav, *self._results_body(prev)]
        elif self.kind == "item":
            body = [*head, *nav, prev, *self._item_body()]
        elif self.kind == "sub":
            body = [*head, *nav, prev, *self._sub_body()]
        else:
            body = self._done_body()
        return Page(self.kind, tuple(body), self.goal.instruction_text)

    def _results_body(self, prev: Element) -> list[Element]:
        total = len(self.results)
        out = [Element("text", f"Page {self.page_no} (Total results: {total})")]
        if self.page_no > 1:
            out.append(prev)
        out.append(Element("button", NEXT_PAGE, NEXT_PAGE.lower()))
        for asin in self.results[(self.page_no - 1) * PRODUCT_WINDOW : self.page_no * PRODUCT_WINDOW]:
            p = self.catalog.by_asin[asin]
            out += [Element("link", asin, asin.lower()), Element("text", p.title), Element("text", p.price_tag)]
        return out

    def _item_body(self) -> list[Element]:
        p = self.catalog.by_asin[self.asin or ""]
        out = []
        for name, values in p.options.items():
            out.append(Element("text", name))
            out += [Element("option", v, v, name) for v in values]
        out += [
            Element("text", p.title),
            Element("text", f"Price: {p.price_tag}"),
            Element("text", f"Rating: {p.rating}"),
        ]
        for sub in SUB_PAGES if self.show_attrs else SUB_PAGES[:3]:
            out.append(Element("button", sub, sub.lower()))
        return out + [Element("button", BUY_NOW, BUY_NOW.lower())]

    def _sub_body(self) -> list[Element]:
        p = self.catalog.by_asin[self.asin or ""]
        if self.sub_page == "Description":
            texts = [p.description]
        elif self.sub_page == "Features":
            texts = list(p.bullet_points)
        elif self.sub_page == "Reviews":  # WebShop's review card: the quoted title, the score, the body
            texts = [
                t
                for r in p.reviews
                for t in (f'"{r.get("title", "")}"', str(r.get("score", "")), str(r.get("body", "")))
            ]
        else:
            texts = list(p.attributes)
        return [Element("text", t) for t in texts if t.strip()]

    def _done_body(self) -> list[Element]:
        assert self.outcome is not None
        lines = [
            f"Purchased: {self.asin}",
            *(f"{k}: {v}" for k, v in self.options.items()),
            "Your score (min 0.0, max 1.0)",
            f"{self.outcome.total:.4f}",
            *self.outcome.lines(),
        ]
        return [Element("text", "Thank you for shopping with us!"), *(Element("text", t) for t in lines)]

    # ------------------------------------------------------------------ oracle
    def oracle_action(self) -> str | None:
        """The next action of an oracle that knows the goal (for the expert agent and demonstrations)."""
        goal = self.goal
        if self.kind == "done":
            return None
        if self.kind == "search":
            query = goal.query if goal.query not in self.searched else _ascii_query(goal.name)
            return f"search[{query}]"
        if self.kind == "sub":
            return f"click[{PREV_PAGE.lower()}]"
        if self.kind == "results":
            return self._oracle_on_results()
        if self.asin != goal.asin:
            return f"click[{PREV_PAGE.lower()}]"
        for name, value in self._goal_choices:
            if self.options.get(name) != value:
                return f"click[{value}]"
        return f"click[{BUY_NOW.lower()}]"

    @functools.cached_property
    def _goal_choices(self) -> list[tuple[str, str]]:
        """The (option name, value) the oracle picks on the goal's product, for each goal option that one matches, in
        the goal's order: a function of the goal alone, so fuzzy-matched once a session, not at every step."""
        product = self.catalog.by_asin[self.goal.asin]
        chosen = (_best_option(product.options, wanted) for wanted in self.goal.goal_options)
        return [best for best in chosen if best is not None]

    def _oracle_on_results(self) -> str:
        target = self.goal.asin
        if target not in self.results:
            return f"click[{BACK_TO_SEARCH.lower()}]"
        page = self.results.index(target) // PRODUCT_WINDOW + 1
        if page == self.page_no:
            return f"click[{target.lower()}]"
        return f"click[{(NEXT_PAGE if page > self.page_no else PREV_PAGE).lower()}]"


def _ascii_query(text: str) -> str:
    words = re.findall(r"[a-z0-9]+", text.lower().encode("ascii", "ignore").decode())
    return " ".join(words)[:MAX_QUERY_CHARS] or "product"


def _best_option(options: dict[str, list[str]], wanted: str) -> tuple[str, str] | None:
    """The product's (option name, value) that best matches a goal option, if it matches (> 85)."""
    scored = [
        (token_set_ratio(normalize_color(v), normalize_color(wanted)), token_set_ratio(v, wanted), name, v)
        for name, values in options.items()
        for v in values
    ]
    if not scored:
        return None
    best = max(scored, key=lambda s: (s[0], s[1]))
    return (best[2], best[3]) if best[0] > 85 else None
