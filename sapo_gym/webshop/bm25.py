"""Lucene-variant BM25 over tokenized documents, built in chunks onto disk and read back memory-mapped.

The index is a folder of ``.npy`` arrays, stored by term (CSC): ``indptr`` (terms + 1), ``docs`` (int32) and
``data`` (float32: each (term, document) score), and the vocabulary: ``terms`` (the sorted terms joined by
``\\n``, as bytes), ``term_offsets``, and ``term_hashes`` / ``term_ids`` (an 8-byte blake2b of each term, sorted,
with the term it names) so a token is looked up by binary search in the mapped file, without a dict of the
vocabulary in each process. Every array is opened with ``mmap_mode="r"``: the processes that read one index
share its pages, and a query touches only its terms' postings.

:meth:`BM25Index.build` reads the documents once, a chunk at a time (their term-document counts go to
temporary files), then writes each chunk's postings at their place in the output, so its memory is bounded by
a chunk and the vocabulary, not by the corpus. The scores are those the whole-corpus computation gives (and
``bm25s`` 0.3.16's ``method="lucene"``), bit for bit: the idf ``log(1 + (N - df + 0.5) / (df + 0.5))`` in
float64, stored as float32; each (document, term) score ``float32(idf × tf / (k1 × (1 - b + b × |d| / avgdl) +
tf))`` with the product and the fraction in float64; postings sorted by term, then document; a query's score
the float32 sum of its tokens' scores in query order (repeated tokens count again).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

__all__ = ["BM25Index", "TermLookup", "term_hash", "mapped"]

CHUNK_DOCS = 20_000
"""Documents per chunk of the build: its temporary arrays hold about 200 postings a document."""
_FILES = ("indptr", "docs", "data", "terms", "term_offsets", "term_hashes", "term_ids")


def mapped(path: Path) -> np.ndarray:
    """A ``.npy`` file mapped read-only, as a plain ndarray view (slicing an ``np.memmap`` costs microseconds more)."""
    return np.load(path, mmap_mode="r").view(np.ndarray)


def term_hash(term: str) -> int:
    """The 64-bit key of a term in ``term_hashes`` (blake2b, 8 bytes, little-endian)."""
    return int.from_bytes(hashlib.blake2b(term.encode(), digest_size=8).digest(), "little")


class TermLookup(Mapping[str, int]):
    """Term → id over the mapped vocabulary arrays; iterates the terms in id (sorted) order."""

    def __init__(self, terms: np.ndarray, offsets: np.ndarray, hashes: np.ndarray, ids: np.ndarray):
        self._terms, self._offsets, self._hashes, self._ids = terms, offsets, hashes, ids
        self._find = functools.lru_cache(maxsize=1 << 16)(self._search)  # queries repeat their words

    def term(self, i: int) -> str:
        return self._terms[self._offsets[i]:self._offsets[i + 1] - 1].tobytes().decode()

    def _search(self, term: str) -> int | None:
        key = np.uint64(term_hash(term))
        j = int(self._hashes.searchsorted(key))
        while j < len(self._hashes) and self._hashes[j] == key:  # a collision of 64-bit keys: compare the terms
            i = int(self._ids[j])
            if self.term(i) == term:
                return i
            j += 1
        return None

    def get(self, term: str, default: int | None = None) -> int | None:  # type: ignore[override]
        found = self._find(term) if isinstance(term, str) else None
        return default if found is None else found

    def __getitem__(self, term: str) -> int:
        i = self.get(term)
        if i is None:
            raise KeyError(term)
        return i

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self.get(term) is not None

    def __iter__(self) -> Iterator[str]:
        return (self.term(i) for i in range(len(self)))

    def __len__(self) -> int:
        return len(self._offsets) - 1


class BM25Index:
    """The mapped arrays of one index (see the module docstring): :meth:`scores` of a token list."""

    def __init__(self, folder: Path):
        arrays = {name: mapped(folder / f"{name}.npy") for name in _FILES}
        self.folder = folder
        self.indptr, self.docs, self.data = arrays["indptr"], arrays["docs"], arrays["data"]
        self.vocab = TermLookup(arrays["terms"], arrays["term_offsets"], arrays["term_hashes"], arrays["term_ids"])
        self.num_docs = int(json.loads((folder / "meta.json").read_text())["num_docs"])

    @classmethod
    def load(cls, folder: Path) -> BM25Index:
        return cls(Path(folder))

    @classmethod
    def build(cls, documents: Iterable[Sequence[str]], folder: Path | None = None, k1: float = 0.9,
              b: float = 0.4) -> BM25Index:
        """Index ``documents`` into ``folder`` (a new one; without it, a temporary folder removed once mapped)."""
        own = folder is None
        out = Path(tempfile.mkdtemp(prefix="sapo-bm25-")) if own else Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        try:
            _Builder(out, k1, b).run(documents)
            return cls(out)
        finally:
            if own:  # the mapped pages stay readable after the names are gone
                shutil.rmtree(out, ignore_errors=True)

    def scores_of_ids(self, ids: Sequence[int]) -> np.ndarray:
        """float32 scores of every document: the sum of the terms' scores (by term id), in query order."""
        total = np.zeros(self.num_docs, dtype=np.float32)
        for i in ids:
            start, end = int(self.indptr[i]), int(self.indptr[i + 1])
            total[self.docs[start:end]] += self.data[start:end]  # a term lists each document once
        return total

    def scores(self, tokens: Sequence[str]) -> np.ndarray:
        """float32 scores of every document for ``tokens`` (unknown tokens add nothing)."""
        return self.scores_of_ids([i for i in (self.vocab.get(t) for t in tokens) if i is not None])


class _Builder:
    """The two passes of :meth:`BM25Index.build` (counts per chunk to disk, then postings in place)."""

    def __init__(self, folder: Path, k1: float, b: float):
        self.folder, self.k1, self.b = folder, k1, b
        self.chunks = Path(tempfile.mkdtemp(prefix=".chunks-", dir=folder))
        self.ids: dict[str, int] = {}
        self.lengths: list[int] = []
        self.n_chunks = 0

    def run(self, documents: Iterable[Sequence[str]]) -> None:
        try:
            batch: list[Sequence[str]] = []
            for doc in documents:
                batch.append(doc)
                if len(batch) == CHUNK_DOCS:
                    self._count(batch)
                    batch = []
            self._count(batch)
            self._write()
        finally:
            shutil.rmtree(self.chunks, ignore_errors=True)

    def _count(self, batch: list[Sequence[str]]) -> None:
        """One chunk's (provisional term id, document) pairs and their counts, to disk."""
        if not batch:
            return
        ids, first = self.ids, len(self.lengths)
        lengths = [len(d) for d in batch]
        self.lengths += lengths
        term = np.fromiter((ids.setdefault(t, len(ids)) for d in batch for t in d), dtype=np.int64, count=sum(lengths))
        doc = np.repeat(np.arange(first, first + len(batch), dtype=np.int64), lengths)
        pairs, tf = np.unique((term << 32) | doc, return_counts=True)
        np.save(self.chunks / f"{self.n_chunks}-pairs.npy", pairs)
        np.save(self.chunks / f"{self.n_chunks}-tf.npy", tf)
        self.n_chunks += 1

    def _chunk(self, k: int, remap: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pairs, tf = np.load(self.chunks / f"{k}-pairs.npy"), np.load(self.chunks / f"{k}-tf.npy")
        return remap[pairs >> 32], pairs & 0xFFFFFFFF, tf

    def _write(self) -> None:
        vocab = sorted(self.ids)
        remap = np.empty(len(vocab), dtype=np.int64)
        remap[np.fromiter((self.ids[t] for t in vocab), dtype=np.int64, count=len(vocab))] = np.arange(len(vocab))
        self.ids = {}
        df = np.zeros(len(vocab), dtype=np.int64)
        for k in range(self.n_chunks):
            df += np.bincount(self._chunk(k, remap)[0], minlength=len(vocab))
        n, lengths = len(self.lengths), np.asarray(self.lengths, dtype=np.int64)
        idf_of = {int(f): np.float32(math.log(1 + (n - int(f) + 0.5) / (int(f) + 0.5))) for f in np.unique(df)}
        idf = np.array([idf_of[int(f)] for f in df], dtype=np.float32)
        avgdl = float(lengths.mean()) if n else 1.0  # as bm25s: the exact integer sum over n, in float64
        with np.errstate(divide="ignore", invalid="ignore"):  # avgdl 0: every document empty, no posting reads norm
            norm = self.k1 * ((1 - self.b) + self.b * lengths.astype(np.float64) / avgdl)  # bm25s's operation order
        indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        self._postings(remap, idf, norm, indptr)
        np.save(self.folder / "indptr.npy", indptr)
        _save_vocab(self.folder, vocab)
        (self.folder / "meta.json").write_text(json.dumps({"num_docs": n, "terms": len(vocab), "k1": self.k1, "b": self.b}))

    def _postings(self, remap: np.ndarray, idf: np.ndarray, norm: np.ndarray, indptr: np.ndarray) -> None:
        """Each chunk's postings written at their place: by term, then document (chunks come in document order)."""
        nnz = int(indptr[-1])
        docs = np.lib.format.open_memmap(self.folder / "docs.npy", mode="w+", dtype=np.int32, shape=(nnz,))
        data = np.lib.format.open_memmap(self.folder / "data.npy", mode="w+", dtype=np.float32, shape=(nnz,))
        cursor = indptr[:-1].copy()
        for k in range(self.n_chunks):
            term, doc, tf = self._chunk(k, remap)
            order = np.lexsort((doc, term))
            term, doc, tf64 = term[order], doc[order], tf[order].astype(np.float64)
            at = cursor[term] + np.arange(len(term)) - np.searchsorted(term, term)
            docs[at] = doc
            data[at] = (idf[term].astype(np.float64) * (tf64 / (norm[doc] + tf64))).astype(np.float32)
            cursor += np.bincount(term, minlength=len(cursor))
        docs.flush()
        data.flush()
        del docs, data


def _save_vocab(folder: Path, vocab: list[str]) -> None:
    encoded = [t.encode() + b"\n" for t in vocab]  # tokens hold no whitespace
    offsets = np.zeros(len(vocab) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    np.save(folder / "terms.npy", np.frombuffer(b"".join(encoded), dtype=np.uint8))
    np.save(folder / "term_offsets.npy", offsets)
    hashes = np.fromiter((term_hash(t) for t in vocab), dtype=np.uint64, count=len(vocab))
    order = np.argsort(hashes, kind="stable")
    np.save(folder / "term_hashes.npy", hashes[order])
    np.save(folder / "term_ids.npy", order.astype(np.int64))
