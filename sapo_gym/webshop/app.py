"""The shop as a flask web app: what ``sapo-gym webshop serve`` runs and the browser env drives.

Every page is a :class:`~sapo_gym.webshop.shop.Page` rendered to HTML: each visible text is its
own element, so a browser's visible text is exactly the text mode's observation. Routes:

* ``GET /`` — a random goal of the split, then its session;
* ``GET /start/<goal>`` — a new session on goal number ``goal`` (catalog order);
* ``GET /s/<sid>`` — the session's current page;
* ``POST /s/<sid>/search`` (form ``q``) and ``POST /s/<sid>/click`` (form ``key``) — one action
  each, then a redirect to the page (inadmissible actions change nothing);
* ``GET /s/<sid>/state.json`` — page kind, score and reward breakdown.

``<body data-nonce>`` counts the executed actions of the session, so a driver can tell that a
click has been served. An app keeps at most :data:`MAX_SESSIONS` sessions: opening one more drops the
least recently used (its pages then answer 404), so visitors who open sessions and leave cannot grow it.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import uuid
from collections import OrderedDict
from typing import Any

from flask import Flask, abort, jsonify, redirect, render_template, request, url_for

from sapo_gym.webshop.catalog import Catalog
from sapo_gym.webshop.noun_table import catalog_noun_rule
from sapo_gym.webshop.nouns import NounRule
from sapo_gym.webshop.search import SearchIndex
from sapo_gym.webshop.shop import ShopSession

__all__ = ["create_app", "ShopState", "MAX_SESSIONS"]

MAX_SESSIONS = 1_000


@dataclasses.dataclass
class ShopState:
    """The sessions served by one app."""

    catalog: Catalog
    index: SearchIndex
    goal_range: range
    nouns: NounRule
    show_attrs: bool = False
    max_sessions: int = MAX_SESSIONS
    sessions: OrderedDict[str, ShopSession] = dataclasses.field(default_factory=OrderedDict)
    """Oldest use first."""
    nonces: dict[str, int] = dataclasses.field(default_factory=dict)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def start(self, goal_index: int) -> str:
        sid = uuid.uuid4().hex[:12]
        with self.lock:
            while len(self.sessions) >= self.max_sessions:
                dropped, _ = self.sessions.popitem(last=False)
                self.nonces.pop(dropped, None)
            self.sessions[sid] = ShopSession(
                self.catalog, self.index, self.catalog.goals[goal_index], self.nouns, show_attrs=self.show_attrs
            )
            self.nonces[sid] = 0
        return sid

    def get(self, sid: str) -> ShopSession | None:
        """The session ``sid`` (now the most recently used), or None when it is unknown or was dropped."""
        with self.lock:
            session = self.sessions.get(sid)
            if session is not None:
                self.sessions.move_to_end(sid)
            return session

    def act(self, sid: str, action: str) -> None:
        with self.lock:
            session = self.sessions.get(sid)
            if session is not None and session.step(action):
                self.nonces[sid] += 1


def create_app(
    catalog: Catalog,
    index: SearchIndex,
    *,
    goal_range: range | None = None,
    show_attrs: bool = False,
    nouns: NounRule | None = None,
) -> Flask:
    """A flask app serving ``catalog``; ``/`` draws goals from ``goal_range`` (default: all).

    ``nouns``: the type reward's rule (default: the catalog's, :func:`.noun_table.catalog_noun_rule`, fixed now)."""
    app = Flask(__name__)
    goals = goal_range if goal_range is not None else range(len(catalog.goals))
    state = ShopState(catalog, index, goals, nouns or catalog_noun_rule(catalog), show_attrs)
    app.extensions["webshop"] = state
    _add_page_routes(app, state)
    _add_action_routes(app, state)
    return app


def _session_of(state: ShopState, sid: str) -> ShopSession:
    """The session ``sid``, or a 404 answer when it is unknown or was dropped."""
    session = state.get(sid)
    if session is None:
        abort(404)
    return session


def _add_page_routes(app: Flask, state: ShopState) -> None:
    """The GET routes: ``/``, ``/start/<goal>``, ``/s/<sid>`` and ``/s/<sid>/state.json``."""
    catalog = state.catalog

    @app.get("/")
    def index_page() -> Any:
        return redirect(url_for("start", goal=random.choice(state.goal_range)))

    @app.get("/start/<int:goal>")
    def start(goal: int) -> Any:
        if not 0 <= goal < len(catalog.goals):
            abort(404)
        return redirect(url_for("show", sid=state.start(goal)))

    @app.get("/s/<sid>")
    def show(sid: str) -> Any:
        session = _session_of(state, sid)
        outcome = dataclasses.asdict(session.outcome) if session.outcome else None
        return render_template(
            "page.html",
            page=session.render(),
            sid=sid,
            nonce=state.nonces.get(sid, 0),
            chosen=session.options,
            score=outcome["total"] if outcome else None,
            outcome=outcome,
        )

    @app.get("/s/<sid>/state.json")
    def state_json(sid: str) -> Any:
        session = _session_of(state, sid)
        return jsonify(
            page=session.kind,
            nonce=state.nonces.get(sid, 0),
            score=session.score,
            breakdown=dataclasses.asdict(session.outcome) if session.outcome else None,
        )


def _add_action_routes(app: Flask, state: ShopState) -> None:
    """The POST routes, one action each, then a redirect to the session's page."""

    @app.post("/s/<sid>/search")
    def search(sid: str) -> Any:
        _session_of(state, sid)
        state.act(sid, f"search[{request.form.get('q', '')}]")
        return redirect(url_for("show", sid=sid))

    @app.post("/s/<sid>/click")
    def click(sid: str) -> Any:
        _session_of(state, sid)
        state.act(sid, f"click[{request.form.get('key', '')}]")
        return redirect(url_for("show", sid=sid))
