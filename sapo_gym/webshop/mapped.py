"""Read-only files shared by every process: ``.npy`` arrays mapped, records read at offsets.

A mapped array's pages are the page cache's, shared by every process that maps it. The maps are advised
``MADV_RANDOM`` (the shop reads them at scattered places: a term's postings, a binary search), so the kernel reads
no more than it is asked. Records of varying length (a product's JSON, a title) are read with ``pread`` from
:class:`FileBytes` instead: a read fault on a map also maps up to 64 KB of neighbouring cached pages into the
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

__all__ = ["mapped_array", "FileBytes"]


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


def mapped_array(path: Path) -> np.ndarray:
    """The array of a ``.npy`` file, read-only, its data mapped (the header read as ``np.load`` reads it)."""
    with open(path, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read(fh)
        offset = fh.tell()
    count = math.prod(shape)
    if not count:
        return np.empty(shape, dtype=dtype)
    mm = _map(path)
    data = np.frombuffer(mm, dtype=dtype, count=count, offset=offset)  # type: ignore[arg-type]
    return data.reshape(shape, order="F" if fortran else "C")
