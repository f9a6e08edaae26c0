"""A ``gymnasium.spaces.Text`` that admits any Unicode string, and how gymnasium's vector envs batch it.

gymnasium's ``Text`` checks every character against an explicit charset; enumerating all of
Unicode there would cost hundreds of MB. ``UnicodeText`` keeps ``Text``'s interface and sampling
(over a printable charset with some non-ASCII letters) but ``contains`` accepts any ``str``
whose length is within bounds.

gymnasium's vector utilities are ``functools.singledispatch`` functions; this module registers
``UnicodeText`` handlers (registering is all it does to gymnasium) so that:

* ``AsyncVectorEnv``'s shared memory (its default) carries any string: each env has a row of
  ``max_length + 1`` uint32 (its length, then its UTF-32 code points, lone surrogates included), so
  ``4 * (max_length + 1)`` bytes per env (4 MiB for the envs' ``2**20``: the buffer holds every string
  the space contains, none is cut). Writing a longer string raises. Reading gives
  :class:`SharedTexts`, a live view that ``deepcopy`` (what the vector env returns by default) turns
  into a ``tuple`` of ``str``, as ``SyncVectorEnv`` returns. (gymnasium's ``Text`` handler maps
  characters outside its charset to nothing and reads its buffer once, so every step returned the
  first read, ``max_length`` times the charset's first character.)
* An observation space whose :attr:`UnicodeText.gym_vector_refusal` is set (registration sets it on
  the envs whose ``info["action_mask"]`` length varies from env to env, which gymnasium's
  ``VectorEnv._add_info`` stacks into one fixed-shape array) is refused when gymnasium's own
  ``SyncVectorEnv`` / ``AsyncVectorEnv`` build their observation buffer, with that message; sapo's
  vector envs build theirs inside :func:`ragged_info_batching` and batch such infos per env.
"""

from __future__ import annotations

import multiprocessing as mp
import string
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from types import ModuleType
from typing import Any

import numpy as np
from gymnasium import error
from gymnasium.spaces import Text
from gymnasium.vector.utils import (
    create_empty_array,
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)

__all__ = ["UnicodeText", "SAMPLE_CHARSET", "SharedTexts", "ragged_info_batching"]

SAMPLE_CHARSET = string.ascii_letters + string.digits + string.punctuation + " \n\téßøλжあ中"
_CODE = np.dtype("<u4")
"""One UTF-32 code point (little-endian) in shared memory; the first of each env's row is its length."""
_RAGGED_BATCHING: ContextVar[bool] = ContextVar("sapo_gym_ragged_info_batching", default=False)


class UnicodeText(Text):
    """Text space over all of Unicode (``contains`` checks type and length only)."""

    gym_vector_refusal: str | None = None
    """Why gymnasium's own ``SyncVectorEnv``/``AsyncVectorEnv`` cannot batch an env with this observation space
    (its infos), raised when they are built; None: they can. Not part of the space's equality."""

    def __init__(self, max_length: int, *, min_length: int = 0, seed: Any = None):
        super().__init__(max_length=max_length, min_length=min_length, charset=SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, UnicodeText) and (other.min_length, other.max_length) == (
            self.min_length,
            self.max_length,
        )


@contextmanager
def ragged_info_batching() -> Iterator[None]:
    """Inside it, a vector env that batches ragged infos per env builds over a space with ``gym_vector_refusal``."""
    token = _RAGGED_BATCHING.set(True)
    try:
        yield
    finally:
        _RAGGED_BATCHING.reset(token)


def _check_batchable(space: UnicodeText) -> None:
    if space.gym_vector_refusal and not _RAGGED_BATCHING.get():
        raise error.Error(space.gym_vector_refusal)


class SharedTexts(Sequence[str]):
    """The strings in an ``AsyncVectorEnv``'s shared memory, decoded on each access (a live view, as gymnasium's
    arrays over shared memory are); ``copy.deepcopy`` and pickling give a ``tuple`` of ``str``."""

    def __init__(self, shared_memory: Any, n: int, max_length: int):
        self._rows = np.frombuffer(shared_memory.get_obj(), dtype=_CODE).reshape(n, max_length + 1)

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self)[index]
        row = self._rows[index]
        return row[1 : 1 + int(row[0])].tobytes().decode("utf-32-le", "surrogatepass")

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, (tuple, list, SharedTexts)) and tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[str, ...]:
        return tuple(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return tuple, (tuple(self),)

    def __repr__(self) -> str:
        return f"SharedTexts({tuple(self)!r})"


@create_empty_array.register(UnicodeText)
def _create_empty_unicode_text(space: UnicodeText, n: int = 1, fn: Callable = np.zeros) -> tuple[str, ...]:
    _check_batchable(space)
    return create_empty_array.dispatch(Text)(space, n=n, fn=fn)


@create_shared_memory.register(UnicodeText)
def _create_unicode_text_shared_memory(space: UnicodeText, n: int = 1, ctx: ModuleType = mp) -> Any:
    _check_batchable(space)
    return ctx.Array(np.dtype(np.uint32).char, n * (space.max_length + 1))


@read_from_shared_memory.register(UnicodeText)
def _read_unicode_text_from_shared_memory(space: UnicodeText, shared_memory: Any, n: int = 1) -> SharedTexts:
    return SharedTexts(shared_memory, n, space.max_length)


@write_to_shared_memory.register(UnicodeText)
def _write_unicode_text_to_shared_memory(space: UnicodeText, index: int, value: str, shared_memory: Any) -> None:
    codes = np.frombuffer(value.encode("utf-32-le", "surrogatepass"), dtype=_CODE)
    if len(codes) > space.max_length:
        raise ValueError(f"observation of {len(codes)} characters exceeds the space's max_length {space.max_length}")
    width = space.max_length + 1
    row = np.frombuffer(shared_memory.get_obj(), dtype=_CODE)[index * width : (index + 1) * width]
    row[1 : 1 + len(codes)] = codes
    row[0] = len(codes)
