"""Writing result files safely: never through a symbolic link, and whole or not at all.

:func:`write_atomic` writes a file's bytes to a temporary file in the same folder, ``fsync``'s it, renames it
over the target and ``fsync``'s the folder: a crash, a full disk or a kill leaves the previous file as it was
(and no half-written one). :func:`refuse_symlink` is the check every output path of an evaluation goes
through first: a symbolic link there (dangling or not) is refused, not followed.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = ["OutputFileError", "refuse_symlink", "write_atomic"]


class OutputFileError(ValueError):
    """An output path that is refused (a symbolic link) or a write that failed; the message names the file."""


def refuse_symlink(path: str | os.PathLike, what: str = "output file") -> Path:
    """``path`` as a Path; :class:`OutputFileError` when it is a symbolic link."""
    path = Path(path)
    if path.is_symlink():
        raise OutputFileError(
            f"the {what} {path} is a symbolic link (to {os.readlink(path)!r}); it is not followed: "
            "give the path of a regular file"
        )
    return path


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike, data: bytes, what: str = "output file") -> None:
    """Replace ``path`` by a file holding ``data`` (a temporary file in the same folder, fsync'd, renamed);
    :class:`OutputFileError` naming the file when it cannot be written (the previous file, if any, is kept)."""
    path = refuse_symlink(path, what)
    folder = path.parent if str(path.parent) else Path(".")
    temporary = folder / f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)  # a link made at ``path`` meanwhile is replaced, not followed
    except OSError as exc:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise OutputFileError(
            f"cannot write the {what} {path}: {exc.strerror or exc}; the previous file (if any) is unchanged"
        ) from None
    _fsync_dir(folder)
