"""User text on the pages: escaped, bidi-isolated, bounded; and the display-name key that tells two names apart.

* :func:`user_text` (the templates' ``user_text`` filter): the text without Unicode bidi controls (U+202A–U+202E,
  U+2066–U+2069, U+200E/U+200F, U+061C: a right-to-left override in a name or a description would reorder the
  page around it), cut to ``limit`` characters (a 2,000-character word must not stretch a table), HTML-escaped and
  wrapped in ``<bdi>``, so right-to-left text stays inside its own box.
* :func:`name_key`: a display name as people read it (NFKC, case-folded, white space collapsed, bidi and other
  invisible format characters dropped); two names with the same key are the same name on the board.
"""

from __future__ import annotations

import re
import unicodedata

from markupsafe import Markup, escape

__all__ = ["BIDI_CONTROLS", "strip_bidi", "user_plain", "user_text", "name_key"]

BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def strip_bidi(text: str) -> str:
    return BIDI_CONTROLS.sub("", text)


def user_plain(value: object, limit: int | None = 200) -> str:
    """``value`` without bidi controls, at most ``limit`` characters (then an ellipsis): for a ``<title>`` or an
    ``<option>``, where no markup goes (the template escapes it)."""
    text = strip_bidi("" if value is None else str(value))
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 1, 0)] + "\u2026"
    return text


def user_text(value: object, limit: int | None = None) -> Markup:
    """``value`` as user text in a page: :func:`user_plain`, escaped, in a ``<bdi>``."""
    return Markup("<bdi>") + escape(user_plain(value, limit)) + Markup("</bdi>")


def name_key(name: str) -> str:
    """The key under which a display name is owned (see the module's docstring)."""
    text = unicodedata.normalize("NFKC", name)
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return " ".join(text.casefold().split())
