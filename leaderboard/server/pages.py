"""HTML pages: boards, a submission (per-category bars, episodes), a trajectory viewer, a comparison."""

from __future__ import annotations

import json
from typing import Any

from flask import Blueprint, abort, current_app, redirect, render_template, request, url_for

from leaderboard import private
from leaderboard.server import ranking, summaries
from leaderboard.server.bar_chart import category_bars
from leaderboard.server.display import user_plain, user_text
from leaderboard.server.store import SORT_KEYS, Store
from sapo_gym.bundle import BundleError

__all__ = ["pages", "BOARD_PAGE"]

BOARD_PAGE = 500
"""Verified rows per board page (``?page=N``); ranks count every verified row of the board, on any page."""

pages = Blueprint(
    "pages", __name__, template_folder="templates", static_folder="static", static_url_path="/static/leaderboard"
)
pages.add_app_template_filter(user_text, "user_text")  # user text: bidi-isolated, bounded, escaped
pages.add_app_template_filter(user_plain, "user_plain")  # the same without markup (titles, options)


def _ctx() -> dict[str, Any]:
    return current_app.extensions["sapo_gym"]


def _submission(submission_id: int) -> tuple[Any, dict[str, Any]]:
    """The row and its precomputed summary (the bundle without turns; see leaderboard.server.summaries)."""
    row = _ctx()["store"].get(submission_id)
    if row is None:
        abort(404, description=f"no submission {submission_id}")
    return row, summaries.summary(_ctx()["store"], row)


@pages.get("/")
def index() -> Any:
    boards = list(_ctx()["boards"])
    if len(boards) == 1:
        return redirect(url_for("pages.board", spec_hash=boards[0].spec_hash))
    store: Store = _ctx()["store"]
    cards = [(b, store.submissions(b.spec_hash, limit=3, statuses=("verified",))) for b in boards]  # ranked = verified
    return render_template("index.html", cards=cards, skipped=_ctx()["boards"].skipped)


def _page_number() -> int:
    """The ``page`` query parameter: a whole number from 1 (1 when absent); anything else is a 400."""
    raw = request.args.get("page", "1")
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 9 and int(raw) >= 1):
        abort(400, description=f"page must be a whole number from 1 to 999999999, not {raw[:20]!r}")
    return int(raw)


@pages.get("/board/<spec_hash>")
def board(spec_hash: str) -> Any:
    registry = _ctx()["boards"]
    hosted = registry.get(spec_hash)
    if hosted is None:
        abort(404, description=f"no board with spec hash {spec_hash}")
    sort = request.args.get("sort", "success")
    if sort not in SORT_KEYS:
        sort = "success"
    order = "asc" if request.args.get("order") == "asc" else "desc"
    store: Store = _ctx()["store"]
    total = store.count(spec_hash, ("verified",))
    page = min(_page_number(), max(1, -(-total // BOARD_PAGE)))  # past the last page: the last page
    rows = store.submissions(
        spec_hash,
        sort=sort,
        descending=order == "desc",
        statuses=("verified",),
        limit=BOARD_PAGE,
        offset=(page - 1) * BOARD_PAGE,
    )
    entries = [(r, json.loads(r.agent_json), json.loads(r.aggregates_json)) for r in rows]
    ranks = ranking.ranks(store, [r.id for r in rows])  # over all verified rows of the board
    pending = store.submissions(
        spec_hash, sort="created", descending=False, limit=100, statuses=("pending", "verifying")
    )
    categories = sorted({c for _, _, agg in entries for c in agg if c != "all"})
    return render_template(
        "board.html",
        board=hosted,
        private=private.board_info(hosted),
        boards=list(registry),
        entries=entries,
        ranks=ranks,
        categories=categories,
        sort=sort,
        order=order,
        page=page,
        total=total,
        first=(page - 1) * BOARD_PAGE,
        marks=_ctx()["store"].marks(rows + pending),
        pending=[(r, json.loads(r.aggregates_json)) for r in pending],
        live_board=store.live_board(spec_hash),
    )


@pages.get("/submission/<int:submission_id>")
def submission(submission_id: int) -> Any:
    row, bundle = _submission(submission_id)
    withheld = private.withheld(row.split)
    if withheld:  # unseen games: aggregates only, no episode list, no comparison
        bundle = {**bundle, "episodes": []}
    others = [] if withheld else [r for r in _ctx()["store"].submissions(row.spec_hash) if r.id != row.id]
    marks = _ctx()["store"].marks([row])[row.id]
    live_runs = (
        _ctx()["live"].counts(row.token_id, row.spec_hash) if marks["live"] and row.token_id is not None else None
    )
    board_runs = _ctx()["store"].live_board(row.spec_hash, listed=0) if marks["live"] else None  # every token's runs
    pages_total = max(1, -(-len(bundle["episodes"]) // summaries.PAGE))
    page = min(max(request.args.get("page", 1, type=int), 1), pages_total)
    first = (page - 1) * summaries.PAGE
    return render_template(
        "submission.html",
        row=row,
        bundle=bundle,
        chart=category_bars(bundle["aggregates"]),
        score_chart=category_bars(bundle["aggregates"], "score"),
        others=others,
        episodes=bundle["episodes"][first : first + summaries.PAGE],
        first=first,
        page=page,
        pages=pages_total,
        marks=marks,
        live_runs=live_runs,
        board_runs=board_runs,
        withheld=withheld,
    )


@pages.get("/submission/<int:submission_id>/episode/<int:index>")
def episode(submission_id: int, index: int) -> Any:
    row, bundle = _submission(submission_id)
    if private.withheld(row.split):
        abort(403, description=private.withheld(row.split))
    ep = summaries.episode(_ctx()["store"], row, index)  # one stored chunk, not the whole bundle
    if ep is None:
        abort(404, description=f"submission {submission_id} has no episode {index}")
    step = min(max(request.args.get("step", 0, type=int), 0), len(ep["turns"]))
    return render_template("episode.html", row=row, bundle=bundle, ep=ep, index=index, step=step)


@pages.get("/compare")
def compare() -> Any:
    a, b = request.args.get("a", type=int), request.args.get("b", type=int)
    if a is None or b is None:
        abort(400, description="choose two submissions to compare")
    row_a, _ = _submission(a)
    row_b, _ = _submission(b)
    if private.withheld(row_a.split) or private.withheld(row_b.split):
        abort(403, description=private.withheld(private.PRIVATE_SPLIT))
    try:
        result = summaries.comparison(_ctx()["store"], row_a, row_b)
    except BundleError as exc:
        abort(422, description=str(exc))
    return render_template("compare.html", a=row_a, b=row_b, result=result)
