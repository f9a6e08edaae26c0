"""gzip bodies cost time linear in their size, whatever their members: a cap on the members and on the output."""

from __future__ import annotations

import gzip
import zlib
from typing import Any

import pytest

from leaderboard.server import limits
from leaderboard.server.limits import MAX_GZIP_MEMBERS, gunzip_strict
from sapo_gym.bundle import BundleError

_INFLATER = zlib.decompressobj  # the real one (the tests patch the module's attribute)


class _Counting:
    """A zlib inflater that counts the input bytes it is given (the work; a quadratic inflate feeds the rest each time)."""

    fed = 0

    def __init__(self, wbits: int):
        self._inner = _INFLATER(wbits=wbits)

    def decompress(self, data: Any, max_length: int = 0) -> bytes:
        _Counting.fed += len(data)
        return self._inner.decompress(data, max_length)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_many_empty_members_cost_linear_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits.zlib, "decompressobj", lambda wbits: _Counting(wbits))
    for members in (1_000, 4_000):
        data = gzip.compress(b"", mtime=0) * members
        _Counting.fed = 0
        assert gunzip_strict(data, 1 << 20, max_members=members) == b""
        assert _Counting.fed <= 4 * len(data), (members, _Counting.fed, len(data))


def test_members_past_the_cap_are_refused_before_they_are_inflated(monkeypatch: pytest.MonkeyPatch) -> None:
    data = gzip.compress(b"", mtime=0) * 400_000  # 8 MB of empty members
    monkeypatch.setattr(limits.zlib, "decompressobj", lambda wbits: _Counting(wbits))
    _Counting.fed = 0
    with pytest.raises(BundleError, match="gzip members") as exc:
        gunzip_strict(data, 64 << 20)
    assert exc.value.status == 400 and _Counting.fed <= 4 * MAX_GZIP_MEMBERS * 20


def test_several_members_and_large_ones_still_inflate() -> None:
    parts = [b"a" * 1000, bytes(range(256)) * 20_000, b"", b"{}"]
    data = b"".join(gzip.compress(p) for p in parts)
    assert gunzip_strict(data, 64 << 20) == b"".join(parts)
    assert gunzip_strict(gzip.compress(b"x"), 1) == b"x"


# mtime=0 and named ids: a collected test id must not depend on the clock (xdist workers collect apart)
@pytest.mark.parametrize(
    "data, status",
    [
        (gzip.compress(b"x" * 2000, mtime=0), 413),  # the output is capped
        (gzip.compress(b"ok", mtime=0) + b"junk", 400),
        (gzip.compress(b"ok", mtime=0)[:-3], 400),
        (b"", 400),
    ],
    ids=["capped", "trailing-junk", "truncated", "empty"],
)
def test_output_cap_and_framing(data: bytes, status: int) -> None:
    from werkzeug.exceptions import RequestEntityTooLarge

    with pytest.raises((BundleError, RequestEntityTooLarge)) as exc:
        gunzip_strict(data, 1000)
    assert getattr(exc.value, "status", getattr(exc.value, "code", None)) == status


def test_an_upload_of_many_members_is_a_400(client, auth, expert_bundle) -> None:  # type: ignore[no-untyped-def]
    from tests.support.leaderboard import body

    data = gzip.compress(b"", mtime=0) * 10_000 + gzip.compress(body(expert_bundle))
    response = client.post("/api/v1/submissions", data=data, headers={**auth, "Content-Encoding": "gzip"})
    assert response.status_code == 400 and "gzip members" in response.json["message"]
    ok = client.post(
        "/api/v1/submissions", data=gzip.compress(body(expert_bundle)), headers={**auth, "Content-Encoding": "gzip"}
    )
    assert ok.status_code == 201
