"""Skipping what needs nginx: both serve commands run their app server behind it (``sapo_cli/deploy``)."""

from __future__ import annotations

import pytest

from sapo_cli.deploy.nginx import nginx_binary


def nginx_or_skip() -> None:
    """Skip the calling test, naming the Debian package, when nginx is not installed."""
    try:
        nginx_binary()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
