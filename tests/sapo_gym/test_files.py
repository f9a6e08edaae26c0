"""Result files are written whole or not at all (a temporary file in the same folder, fsync'd, renamed), and never
through a symbolic link."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from sapo_gym import files
from sapo_gym.files import OutputFileError, refuse_symlink, write_atomic


def test_a_failed_write_keeps_the_previous_file_and_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "bundle.json"
    write_atomic(target, b'{"old": 1}')
    real_write, calls = os.write, []

    def full_disk(fd: int, data: bytes) -> int:  # the first write gets 10 bytes out, then the disk is full
        calls.append(len(data))
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, bytes(data[:10]))

    monkeypatch.setattr(files.os, "write", full_disk)
    with pytest.raises(OutputFileError, match=r"cannot write the bundle .*bundle.json: No space left on device"):
        write_atomic(target, b'{"new": 2, "padding": "' + b"x" * 1000 + b'"}', "bundle")
    monkeypatch.undo()
    assert target.read_bytes() == b'{"old": 1}' and sorted(p.name for p in tmp_path.iterdir()) == ["bundle.json"]
    write_atomic(target, b'{"new": 2}')
    assert target.read_bytes() == b'{"new": 2}'


def test_symbolic_links_are_refused_dangling_or_not(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "out.json"
    link.symlink_to(elsewhere / "target.json")  # dangling
    with pytest.raises(OutputFileError, match="is a symbolic link"):
        write_atomic(link, b"{}")
    with pytest.raises(OutputFileError, match="is a symbolic link"):
        refuse_symlink(link)
    assert not (elsewhere / "target.json").exists() and link.is_symlink()
