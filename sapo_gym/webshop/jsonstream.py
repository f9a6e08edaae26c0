"""Read a JSON file's top-level array or object one member at a time, in bounded memory.

WebShop's full ``items_shuffle.json`` is gigabytes of JSON: ``json.load`` holds all of it as Python objects at
once. :func:`iter_array` and :func:`iter_object` decode one member at a time with the standard library's C
decoder (``JSONDecoder.raw_decode``) over a sliding buffer of the file, so memory is bounded by the buffer and the
largest member. A malformed or truncated file raises :class:`~.catalog.CatalogError` naming the file and the
member.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from sapo_gym.webshop.catalog import CatalogError

__all__ = ["iter_array", "iter_object"]

READ_CHARS = 1 << 20
MAX_MEMBER_CHARS = 1 << 26
"""A member still undecodable after this many characters is a fault of the file (not a short buffer)."""
_MARGIN = 64
_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class _Reader:
    """A buffer over a text file: peek and decode at a position, reading more when the buffer runs out."""

    def __init__(self, fh: TextIO, name: str):
        self.fh, self.name, self.buf, self.pos, self.eof = fh, name, "", 0, False

    def _more(self) -> bool:
        """Append the next block (at least as much as is buffered, so a long member costs few re-decodes)."""
        if self.eof:
            return False
        block = self.fh.read(max(READ_CHARS, len(self.buf) - self.pos))
        self.eof = not block
        self.buf += block
        return bool(block)

    def peek(self) -> str:
        """The next non-space character ('' at the end of the file); drops the decoded part of the buffer."""
        if self.pos > READ_CHARS:
            self.buf, self.pos = self.buf[self.pos :], 0
        while True:
            self.pos = _SPACE.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf) or not self._more():
                return self.buf[self.pos : self.pos + 1]

    def expect(self, chars: str, record: str) -> str:
        found = self.peek()
        if not found or found not in chars:
            raise CatalogError(self.name, record, "<json>", f"expected one of {chars!r}, found {found or 'the end'!r}")
        self.pos += 1
        return found

    def value(self, record: str) -> Any:
        """Decode the member at the position; a failure, or an end near the buffer's, first reads more (the member
        may go on in the next block), up to :data:`MAX_MEMBER_CHARS`."""
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if self._room() and self._more():
                    continue
                raise CatalogError(self.name, record, "<json>", f"not valid JSON ({exc.msg})") from None
            if end > len(self.buf) - _MARGIN and self._room() and self._more():  # "1." may be "1.5" in the next block
                continue
            self.pos = end
            return value

    def _room(self) -> bool:
        return len(self.buf) - self.pos < MAX_MEMBER_CHARS


def _members(reader: _Reader, close: str, member: Any) -> Iterator[Any]:
    if reader.peek() == close:
        reader.pos += 1
    else:
        index = 0
        while True:
            yield member(index)
            if reader.expect("," + close, f"after #{index}") == close:
                break
            index += 1
    if reader.peek():
        raise CatalogError(reader.name, "<end>", "<json>", "extra data after the top-level value")


def iter_array(path: Path) -> Iterator[Any]:
    """The members of the file's top-level array, in order."""
    with open(path, encoding="utf-8") as fh:
        reader = _Reader(fh, path.name)
        reader.expect("[", "<top>")
        yield from _members(reader, "]", lambda i: reader.value(f"#{i}"))


def iter_object(path: Path) -> Iterator[tuple[str, Any]]:
    """The (key, value) pairs of the file's top-level object, in order."""

    def pair(i: int) -> tuple[str, Any]:
        key = reader.value(f"#{i}")
        if not isinstance(key, str):
            raise CatalogError(path.name, f"#{i}", "<json>", "expected a string key")
        reader.expect(":", key)
        return key, reader.value(key)

    with open(path, encoding="utf-8") as fh:
        reader = _Reader(fh, path.name)
        reader.expect("{", "<top>")
        yield from _members(reader, "}", pair)
