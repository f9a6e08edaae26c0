"""Read-only files shared by every process, read with ``pread`` into short-lived buffers.

The bytes live once, in the page cache, for every process; none of them is mapped. A mapped page counts in the
resident memory of each process that touched it, and a read through a map also maps up to 64 KB of neighbouring
cached pages ("fault-around", which ``MADV_RANDOM`` does not turn off): a process that had looked up a few
thousand keys, or served a few dozen searches, counted most of the catalog's per-product arrays in its memory.
Here each read copies what it asks for into its own buffer (:class:`FileBytes`, :class:`ArrayFile`), and a sorted
array is searched through a sample of its keys held in memory and one block read from the file
(:class:`SortedFile`), so a process's memory does not grow with what it has read.
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path
from typing import Any, Literal

import numpy as np

__all__ = ["FileBytes", "ArrayFile", "SortedFile", "FENCE_STRIDE", "PROGRESS_EVERY"]

PROGRESS_EVERY = 100_000
"""Items (products, documents, titles) between the progress lines the cache builds over these files log at INFO."""

FENCE_STRIDE = 512
"""A :class:`SortedFile` keeps every this-many-th key in memory and reads at most this many more per search."""
_FENCE_READ = 1 << 20
"""Items read at once while the fences are sampled (a short-lived buffer of a few megabytes)."""


class FileBytes:
    """A file read at offsets (``os.pread``: no file position, so threads and forked processes share it)."""

    def __init__(self, path: Path):
        self.fd = os.open(path, os.O_RDONLY)
        weakref.finalize(self, os.close, self.fd)

    def read(self, start: int, end: int) -> bytes:
        return os.pread(self.fd, end - start, start)


def _header(path: Path) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """A ``.npy`` file's shape, Fortran order, dtype and the offset of its data (read as ``np.load`` reads them)."""
    with open(path, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read(fh)
        return shape, fortran, dtype, fh.tell()


class ArrayFile:
    """A 1-d ``.npy`` array read a slice at a time with ``pread`` (:class:`FileBytes`): what a process reads of it
    is copied into its own short-lived buffers, so its memory does not grow with the parts of the file it has read."""

    def __init__(self, path: Path):
        shape, _, dtype, self.start = _header(path)
        if len(shape) != 1:
            raise ValueError(f"{path}: expected a 1-d array, found shape {shape}")
        self.file, self.dtype, self.length = FileBytes(path), dtype, shape[0]

    def __len__(self) -> int:
        return self.length

    def slice(self, start: int, end: int) -> np.ndarray:
        """Items ``start:end`` (read-only; ``0 <= start <= end <= len``)."""
        size = self.dtype.itemsize
        return np.frombuffer(self.file.read(self.start + size * start, self.start + size * end), dtype=self.dtype)

    def item(self, i: int) -> Any:
        """Item ``i`` (negative: from the end), a numpy scalar; an IndexError outside the array."""
        if not -self.length <= i < self.length:
            raise IndexError(f"index {i} is out of bounds for an array of {self.length} items")
        i %= self.length
        return self.slice(i, i + 1)[0]

    def span(self, i: int) -> tuple[int, int]:
        """Items ``i`` and ``i + 1`` as ints: where record ``i`` of an offsets array starts and ends."""
        start, end = self.slice(i, i + 2)
        return int(start), int(end)


class SortedFile(ArrayFile):
    """A sorted 1-d ``.npy`` array, searched as ``np.searchsorted`` searches it: every :data:`FENCE_STRIDE`-th key
    is held in memory (a few kilobytes per million keys), and a search reads the one block its key falls in."""

    def __init__(self, path: Path):
        super().__init__(path)
        self.stride = FENCE_STRIDE
        step = self.stride * max(1, _FENCE_READ // self.stride)
        self.fences = np.concatenate(
            [self.slice(s, min(s + step, self.length))[:: self.stride] for s in range(0, self.length, step)]
            or [np.empty(0, dtype=self.dtype)]
        )

    def searchsorted(self, key: Any, side: Literal["left", "right"] = "left") -> int:
        """``np.searchsorted(array, key, side)``. The insertion point lies after the last fence before it (``left``:
        below ``key``; ``right``: at most ``key``) and at or before the next fence, so it is found in the block of
        ``FENCE_STRIDE`` keys from that fence on (at its end: the next fence's place)."""
        b = int(np.searchsorted(self.fences, key, side)) - 1
        if b < 0:
            return 0
        start = b * self.stride
        block = self.slice(start, min(start + self.stride, self.length))
        return start + int(np.searchsorted(block, key, side))
