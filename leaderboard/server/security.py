"""Response hardening and URL building of the leaderboard app.

* every response carries ``Content-Security-Policy`` (same-origin scripts, styles and forms, no
  framing, no plugins), ``X-Content-Type-Options: nosniff``, ``X-Frame-Options: DENY`` and
  ``Referrer-Policy``;
* absolute URLs (``url``, ``api_url``, ``Location``) are built from the configured base URL, never
  from the request's ``Host`` header (which a client controls);
* ids in URLs are bounded: ``<int:...>`` only matches 0 .. 2^63 - 1, so a larger id is a 404 and
  never reaches the database (SQLite raises ``OverflowError`` past 64 bits);
* every other JSON body sent to the API (the live endpoints) is held to the bundle parser's rules
  before its endpoint runs: no lone surrogate, no integer literal over 64 digits (a 400).
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from flask import Flask, Response, current_app, jsonify, request, url_for
from werkzeug.routing import IntegerConverter

from leaderboard.server.limits import read_body
from sapo_gym.bundle import BundleError
from sapo_gym.bundle_validation import check_unicode, strict_int

__all__ = ["MAX_ID", "BoundedInt", "install", "external_url", "check_base_url"]

MAX_ID = 2**63 - 1
"""Largest id a route accepts (SQL BIGINT)."""

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}


class BoundedInt(IntegerConverter):
    """werkzeug's ``int`` converter, limited to 0 .. :data:`MAX_ID` unless a route says otherwise."""

    def __init__(self, map, fixed_digits: int = 0, min: int | None = 0, max: int | None = MAX_ID, signed: bool = False):  # type: ignore[no-untyped-def]  # noqa: A002
        super().__init__(map, fixed_digits=fixed_digits, min=min, max=MAX_ID if max is None else max, signed=signed)


def check_base_url(base_url: str) -> str:
    """``base_url`` without its trailing slash; ``ValueError`` unless it is an absolute http(s) URL."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ValueError(f"base_url must be an absolute http(s) URL without query or fragment, got {base_url!r}")
    return base_url.rstrip("/")


def external_url(endpoint: str, **values: object) -> str:
    """``url_for(endpoint, **values)`` made absolute with the configured base URL."""
    return current_app.config["SAPO_BASE_URL"] + url_for(endpoint, **values)


def _strict_json_body() -> Response | None:
    """A 400 for an API JSON body with a lone surrogate or a huge integer literal (submissions check their own)."""
    if (
        request.method not in ("POST", "PUT", "PATCH")
        or not request.path.startswith("/api/")
        or request.path == "/api/v1/submissions"
    ):
        return None
    data = read_body(current_app.config["MAX_CONTENT_LENGTH"])  # 413 past the limit; the endpoint gets the same bytes
    try:
        text = data.decode("utf-8")
        check_unicode(text, json.loads(text, parse_int=strict_int))
    except BundleError as exc:
        response = jsonify(error="bad_request", message=str(exc), status=400)
        response.status_code = 400
        return response
    except (ValueError, RecursionError):  # not JSON at all: the endpoint says so in its own words
        return None
    return None


def install(app: Flask, base_url: str) -> None:
    """Bound the ``int`` converter (call before registering blueprints), check API JSON bodies, add the headers."""
    app.url_map.converters["int"] = BoundedInt
    app.config["SAPO_BASE_URL"] = check_base_url(base_url)
    app.before_request(_strict_json_body)

    @app.after_request
    def _headers(response: Response) -> Response:
        for key, value in HEADERS.items():
            response.headers.setdefault(key, value)
        return response
