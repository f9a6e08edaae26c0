"""JSON API, version 1.

``POST /api/v1/submissions`` (``Authorization: Bearer TOKEN``; body: a bundle, optionally
``Content-Encoding: gzip``) · ``GET /api/v1/submissions[?env=&split=&sort=&order=&status=&limit=&offset=]``
(``{"submissions", "total", "offset", "limit", "next"}``: ``next`` is the next page's URL, null on the last) ·
``GET /api/v1/submissions/<id>`` · ``GET /api/v1/submissions/<id>/bundle`` · ``GET /api/v1/boards`` ·
``GET /api/v1/compare?a=<id>&b=<id>``. Errors: ``{"error", "message", "status"}``.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import asdict
from typing import Any

from flask import Blueprint, Response, abort, current_app, jsonify, request

from leaderboard import private
from leaderboard.checks import admit
from leaderboard.precheck import prescan
from leaderboard.server import summaries
from leaderboard.server.db import Submission
from leaderboard.server.limits import RateLimited, gunzip_strict, read_body
from leaderboard.server.names import NameTaken
from leaderboard.server.provenance import EpisodesClaimed, reserved_name
from leaderboard.server.ranking import STATUS_FILTERS, parse_status_filter, ranks
from leaderboard.server.security import external_url
from leaderboard.server.store import SORT_KEYS, Store
from sapo_gym.bundle import BundleError, parse_bundle

__all__ = ["api", "submission_summary"]

api = Blueprint("api", __name__, url_prefix="/api/v1")


def _ctx() -> dict[str, Any]:
    return current_app.extensions["sapo_gym"]


def _error(status: int, message: str, error: str = "invalid_submission") -> Response:
    response = jsonify(error=error, message=message, status=status)
    response.status_code = status
    return response


def submission_summary(row: Submission) -> dict[str, Any]:
    return {
        "id": row.id,
        "agent": json.loads(row.agent_json),
        "submitter": row.submitter,
        "env_id": row.env_id,
        "split": row.split,
        "spec_hash": row.spec_hash,
        "episodes": row.episodes,
        "success": row.success,
        "score": row.score,
        "aggregates": json.loads(row.aggregates_json),
        "status": row.status,
        "verified": row.status == "verified",
        "status_message": row.status_message,
        "created_at": row.created_at.isoformat() + "Z",
        "verified_at": row.verified_at.isoformat() + "Z" if row.verified_at else None,
        "url": external_url("pages.submission", submission_id=row.id),
    }


def _body() -> bytes:
    limit = current_app.config["MAX_CONTENT_LENGTH"]
    encoding = request.headers.get("Content-Encoding", "identity").lower()
    if encoding not in ("gzip", "identity"):
        raise BundleError(f"unsupported Content-Encoding {encoding!r}; use gzip or none", status=415)
    data = read_body(limit)  # 413 past the limit
    return gunzip_strict(data, limit) if encoding == "gzip" else data


def _authenticate() -> Any:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        abort(
            401,
            description="missing bearer token: send 'Authorization: Bearer <token>' (tokens come from 'sapo-gym leaderboard token create')",
        )
    row = _ctx()["store"].authenticate(token.strip())
    if row is None:
        abort(401, description="invalid or revoked token")
    return row


@api.post("/submissions")
def submit() -> Response:
    token = _authenticate()
    try:
        limiter = _ctx()["limiter"]
        limiter.charge(token.id, 1.0)
        data = _body()
        limiter.charge(token.id, limiter.cost(len(data)) - 1.0)
        prescan(data)  # too many turns or episodes: refused before parsing
        bundle = parse_bundle(data)
        env = bundle.get("env")
        if isinstance(env, dict) and private.is_private(env.get("split")):  # unseen games: only live runs reach it
            raise BundleError(
                f"split {private.PRIVATE_SPLIT!r} is private: its boards take live runs only "
                "(POST /api/v1/live/runs), not a bundle file",
                status=403,
            )
        board = admit(bundle, _ctx()["boards"])
    except BundleError as exc:
        return _error(exc.status, str(exc))
    except RateLimited as exc:
        response = _error(429, f"{exc}: token {token.name!r} sends too much too fast", "too_many_requests")
        response.headers["Retry-After"] = str(int(exc.retry_after))
        return response
    taken = reserved_name(bundle["agent"]["name"])
    if taken is not None:
        return _error(
            403, f"the name {bundle['agent']['name']!r} is reserved for the seeded baseline {taken!r}", "reserved_name"
        )
    try:
        added = _ctx()["store"].add(bundle, board, submitter=token.name, token_id=token.id)
    except EpisodesClaimed as exc:
        return _error(409, str(exc), "duplicate_episodes")
    except NameTaken as exc:
        return _error(409, str(exc), "name_taken")
    if added.created:
        summaries.ensure(
            _ctx()["store"], added.id, bundle
        )  # the pages' summary and episode chunks, from the parsed bundle
    _ctx()["verifier"].wake.set()
    body = {
        "id": added.id,
        "duplicate": not added.created,
        "status": added.status,
        "url": external_url("pages.submission", submission_id=added.id),
        "api_url": external_url("api.detail", submission_id=added.id),
    }
    response = jsonify(body)
    response.status_code = 201 if added.created else 200
    response.headers["Location"] = body["api_url"]
    return response


@api.get("/submissions")
def listing() -> Response:
    store: Store = _ctx()["store"]
    sort = request.args.get("sort", "success")
    if sort not in SORT_KEYS:
        return _error(400, f"unknown sort key {sort!r}; valid choices: {list(SORT_KEYS)}", "bad_request")
    spec_hash = request.args.get("spec_hash")
    if spec_hash is None and request.args.get("env"):
        board = _ctx()["boards"].find(request.args["env"], request.args.get("split", ""))
        if board is None:
            return _error(
                404, f"no board for env {request.args['env']!r} split {request.args.get('split')!r}", "not_found"
            )
        spec_hash = board.spec_hash
    statuses = parse_status_filter(request.args.get("status"))
    if statuses is None:
        return _error(
            400,
            f"unknown status filter {request.args['status']!r}; valid choices: {list(STATUS_FILTERS)}",
            "bad_request",
        )
    limit = min(max(request.args.get("limit", 500, type=int), 1), 5000)
    offset = min(max(request.args.get("offset", 0, type=int), 0), 10**9)
    rows = store.submissions(
        spec_hash,
        sort=sort,
        descending=request.args.get("order", "desc") != "asc",
        limit=limit,
        statuses=statuses,
        verified_first=True,
        offset=offset,
    )
    rank = ranks(store, [r.id for r in rows])  # over every verified row of the board, not only these
    total = store.count(spec_hash, statuses)
    more = offset + len(rows) < total  # the next page: these filters, the next offset
    return jsonify(
        submissions=[{**submission_summary(r), "rank": rank.get(r.id)} for r in rows],
        total=total,
        offset=offset,
        limit=limit,
        next=external_url("api.listing", **{**request.args.to_dict(), "offset": offset + limit}) if more else None,
    )


def _row(submission_id: int) -> Submission:
    row = _ctx()["store"].get(submission_id)
    if row is None:
        abort(404, description=f"no submission {submission_id}")
    return row


@api.get("/submissions/<int:submission_id>")
def detail(submission_id: int) -> Response:
    row = _row(submission_id)
    return jsonify(
        {
            **submission_summary(row),
            "rank": ranks(_ctx()["store"], [row.id]).get(row.id),
            "marks": _ctx()["store"].marks([row])[row.id],
        }
    )  # baseline / privileged / live


@api.get("/submissions/<int:submission_id>/bundle")
def bundle(submission_id: int) -> Response:
    # the stored canonical JSON as it is: no parse and re-serialization of a bundle of up to 64 MiB
    row = _row(submission_id)
    withheld = private.withheld(row.split)
    if withheld:
        return _error(403, withheld, "withheld")
    return Response(gzip.decompress(row.bundle_gz), mimetype="application/json")


@api.get("/boards")
def boards() -> Response:
    registry = _ctx()["boards"]
    store: Store = _ctx()["store"]
    hosted = [
        {
            "env_id": b.env_id,
            "split": b.split,
            "spec_hash": b.spec_hash,
            "tasks": len(b.task_ids),
            "spec": b.spec_fields,
            **(
                {"private": {**(private.board_info(b) or {}), "live_runs": store.live_board(b.spec_hash, listed=0)}}
                if private.is_private(b.split)
                else {}
            ),
        }
        for b in registry
    ]
    return jsonify(boards=hosted, unavailable=registry.skipped)


@api.get("/compare")
def compare() -> Response:
    a, b = request.args.get("a", type=int), request.args.get("b", type=int)
    if a is None or b is None:
        return _error(400, "give two submission ids: /api/v1/compare?a=<id>&b=<id>", "bad_request")
    row_a, row_b = _row(a), _row(b)
    if private.withheld(row_a.split) or private.withheld(row_b.split):  # per-task outcomes of unseen tasks
        return _error(403, private.withheld(private.PRIVATE_SPLIT) or "", "withheld")
    try:
        result = summaries.comparison(_ctx()["store"], row_a, row_b)  # summaries, cached
    except BundleError as exc:
        return _error(422, str(exc), "not_comparable")
    return jsonify(
        a=a,
        b=b,
        test=asdict(result.test),
        categories={k: asdict(v) for k, v in result.categories.items()},
        only_in_one=result.only_in_one,
        pairs=[asdict(r) for r in result.rows],
    )
