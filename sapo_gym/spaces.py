"""A ``gymnasium.spaces.Text`` that admits any Unicode string.

gymnasium's ``Text`` checks every character against an explicit charset; enumerating all of
Unicode there would cost hundreds of MB. ``UnicodeText`` keeps ``Text``'s interface and sampling
(over a printable charset with some non-ASCII letters) but ``contains`` accepts any ``str``
whose length is within bounds.
"""

from __future__ import annotations

import string
from typing import Any

from gymnasium.spaces import Text

__all__ = ["UnicodeText", "SAMPLE_CHARSET"]

SAMPLE_CHARSET = string.ascii_letters + string.digits + string.punctuation + " \n\téßøλжあ中"


class UnicodeText(Text):
    """Text space over all of Unicode (``contains`` checks type and length only)."""

    def __init__(self, max_length: int, *, min_length: int = 0, seed: Any = None):
        super().__init__(max_length=max_length, min_length=min_length, charset=SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, UnicodeText) and (other.min_length, other.max_length) == (self.min_length, self.max_length)
