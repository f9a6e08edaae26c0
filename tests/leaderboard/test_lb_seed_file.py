"""The private seed file is refused unless it can be a secret: a regular file of this user's, mode 0600 (or
stricter), of the size the server writes, holding 64 hex digits that are neither a constant nor a pattern."""

from __future__ import annotations

import os
import secrets
import stat
import threading
from pathlib import Path

import pytest

from leaderboard import private


def _write(path: Path, content: bytes, mode: int = 0o600) -> Path:
    path.write_bytes(content)
    os.chmod(path, mode)
    return path


def test_a_fresh_seed_file_is_created_0600_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "seed"
    seed = private.read_seed_file(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and os.path.getsize(path) == 65
    assert private.read_seed_file(path) == seed
    good = secrets.token_hex(32)
    assert private.read_seed_file(_write(tmp_path / "no-newline", good.encode())) == good


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o606, 0o610])
def test_a_seed_file_others_may_read_or_write_is_refused(tmp_path: Path, mode: int) -> None:
    path = _write(tmp_path / "seed", (secrets.token_hex(32) + "\n").encode(), mode)
    with pytest.raises(private.SeedFileError, match="group or others"):
        private.read_seed_file(path)


@pytest.mark.parametrize(
    "content",
    [
        b"\0" * 32,
        b"00" * 32 + b"\n",
        b"6b" * 32 + b"\n",
        b"ff" * 32,
        bytes(range(32)).hex().encode() + b"\n",  # 00 01 02 ... 1f: a pattern, not a secret
        (b"0123456789abcdef" * 4) + b"\n",  # a short period
        (secrets.token_hex(32) + "\n\n").encode(),
        secrets.token_hex(48).encode(),
        b"",
        b"zz" * 32,
    ],
    ids=[
        "32-zero-bytes",
        "hex-zeros",
        "hex-constant",
        "hex-ff",
        "counting",
        "period",
        "two-newlines",
        "too-long",
        "empty",
        "not-hex",
    ],
)
def test_a_seed_that_cannot_be_a_secret_is_refused(tmp_path: Path, content: bytes) -> None:
    with pytest.raises(private.SeedFileError):
        private.read_seed_file(_write(tmp_path / "seed", content))


def test_a_symlink_is_refused_even_to_a_good_file(tmp_path: Path) -> None:
    target = _write(tmp_path / "real", (secrets.token_hex(32) + "\n").encode())
    link = tmp_path / "seed"
    link.symlink_to(target)
    with pytest.raises(private.SeedFileError, match="symbolic link"):
        private.read_seed_file(link)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(private.SeedFileError, match="symbolic link"):
        private.read_seed_file(dangling)
    assert not (tmp_path / "nowhere").exists()  # nothing was created through the link


def test_a_file_of_another_user_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path / "seed", (secrets.token_hex(32) + "\n").encode())
    monkeypatch.setattr(private.os, "geteuid", lambda: os.stat(path).st_uid + 1)
    with pytest.raises(private.SeedFileError, match="owned by uid"):
        private.read_seed_file(path)


def test_a_fifo_or_a_directory_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "seed.fifo"
    os.mkfifo(fifo, 0o600)
    outcome: list[BaseException | str] = []

    def read() -> None:
        try:
            outcome.append(private.read_seed_file(fifo))
        except BaseException as exc:  # noqa: BLE001  (the outcome is checked below)
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(30)  # a bound on a hang, not a timing: the check does not block at all
    if reader.is_alive():  # unblock the reader so the test ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert outcome and isinstance(outcome[0], private.SeedFileError), outcome
    assert "regular file" in str(outcome[0])
    (tmp_path / "dir").mkdir(mode=0o700)
    with pytest.raises(private.SeedFileError, match="regular file"):
        private.read_seed_file(tmp_path / "dir")


def test_serve_refuses_a_bad_seed_file_with_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sapo_cli import main

    monkeypatch.setattr(private, "ACTIVE", None)  # whatever the command sets, the next test starts without a seed

    path = _write(tmp_path / "seed", b"00" * 32 + b"\n")
    code = main(["leaderboard", "--db", str(tmp_path / "lb.db"), "verify", "--private-seed-file", str(path)])
    err = capsys.readouterr().err
    assert code != 0 and "random secret" in err and "00" * 32 not in err
