"""Read-only files shared by every process: ``.npy`` arrays mapped, records read at offsets.

A mapped array's pages are the page cache's, shared by every process that maps it. The maps are advised
``MADV_RANDOM`` (the shop reads them at scattered places: a term's postings, a binary search), so the kernel reads
no more than it is asked. Records of varying length (a product's JSON, a title) and their offsets are read with
``pread`` (:class:`FileBytes`, :class:`OffsetsFile`) instead: a read fault on a map also maps up to 64 KB of neighbouring cached pages into the
process ("fault-around"), and thousands of scattered records would count tens of megabytes of pages it never
reads in its memory.
"""

from __future__ import annotations

import math
import mmap
import os
import weakref
from pathlib import Path

import numpy as np

__all__ = ["mapped_array", "FileBytes", "OffsetsFile"]


def _map(path: Path) -> mmap.mmap | None:
    with open(path, "rb") as fh:
        if not fh.seek(0, 2):
            return None  # an empty file cannot be mapped
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    if hasattr(mmap, "MADV_RANDOM"):
        mm.madvise(mmap.MADV_RANDOM)
    return mm


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


def mapped_array(path: Path) -> np.ndarray:
    """The array of a ``.npy`` file, read-only, its data mapped."""
    shape, fortran, dtype, offset = _header(path)
    count = math.prod(shape)
    if not count:
        return np.empty(shape, dtype=dtype)
    data = np.frombuffer(_map(path), dtype=dtype, count=count, offset=offset)  # type: ignore[arg-type]
    return data.reshape(shape, order="F" if fortran else "C")


class OffsetsFile:
    """A 1-d ``.npy`` array of int64 offsets, read two at a time with ``pread`` (the span of record ``i``)."""

    def __init__(self, path: Path):
        shape, _, dtype, self.start = _header(path)
        if dtype != np.dtype("<i8") or len(shape) != 1:
            raise ValueError(f"{path}: expected 1-d little-endian int64 offsets, found {dtype} {shape}")
        self.file, self.length = FileBytes(path), shape[0]

    def __len__(self) -> int:
        return self.length

    def span(self, i: int) -> tuple[int, int]:
        """Offsets ``i`` and ``i + 1``: where record ``i`` starts and ends."""
        start, end = np.frombuffer(self.file.read(self.start + 8 * i, self.start + 8 * i + 16), dtype="<i8")
        return int(start), int(end)
