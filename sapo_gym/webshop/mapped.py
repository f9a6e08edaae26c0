"""Read-only files shared by every process: small arrays mapped, large ones and records read with ``pread``.

Either way the bytes live once, in the page cache, for every process. A mapped array's pages count in each
process that touched them, so only arrays a process reads small parts of in small numbers of places (binary
searches over sorted keys) are mapped, advised ``MADV_RANDOM`` so the kernel reads no more than it is asked.
Postings, records of varying length (a product's JSON, a title) and their offsets are read with ``pread``
(:class:`FileBytes`, :class:`ArrayFile`) into short-lived buffers: mapped, a read would also map up to 64 KB of
neighbouring cached pages ("fault-around"), and a process that has served many searches would count most of the
index in its memory.
"""

from __future__ import annotations

import math
import mmap
import os
import weakref
from pathlib import Path

import numpy as np

__all__ = ["mapped_array", "FileBytes", "ArrayFile"]


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
        """Items ``start:end`` (read-only)."""
        size = self.dtype.itemsize
        return np.frombuffer(self.file.read(self.start + size * start, self.start + size * end), dtype=self.dtype)

    def span(self, i: int) -> tuple[int, int]:
        """Items ``i`` and ``i + 1`` as ints: where record ``i`` of an offsets array starts and ends."""
        start, end = self.slice(i, i + 2)
        return int(start), int(end)
