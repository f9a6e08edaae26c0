"""Lucene-variant BM25 over tokenized documents, built in chunks onto disk and read back with ``pread``.

The index is a folder of ``.npy`` arrays, stored by term (CSC): ``indptr`` (terms + 1), ``docs`` (int32) and
``data`` (float32: each (term, document) score), and the vocabulary: ``terms`` (the terms in order of first
appearance, joined by ``\\n``, as bytes), ``term_offsets``, and ``term_hashes`` / ``term_ids`` (an 8-byte blake2b of each term, sorted,
with the term it names) so a token is looked up by a search of the sorted file, without a dict of the
vocabulary in each process. The processes that read one index share its pages in the page cache (:mod:`.mapped`):
a lookup reads one block of the sorted hashes, a query reads its terms' postings, each with ``pread``.

:meth:`BM25Index.build` reads the documents once, a chunk at a time (their term-document counts go to
temporary files), then merges the chunks' postings a block of terms at a time and writes them in order, so its
memory is bounded by a chunk, a block and the vocabulary, not by the corpus. The scores are those the whole-corpus computation gives (and
``bm25s`` 0.3.16's ``method="lucene"``), bit for bit: the idf ``log(1 + (N - df + 0.5) / (df + 0.5))`` in
float64, stored as float32; each (document, term) score ``float32(idf × tf / (k1 × (1 - b + b × |d| / avgdl) +
tf))`` with the product and the fraction in float64; postings sorted by term, then document; a query's score
the float32 sum of its tokens' scores in query order (repeated tokens count again).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import shutil
import tempfile
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from sapo_gym.webshop.mapped import PROGRESS_EVERY, ArrayFile, SortedFile

__all__ = ["BM25Index", "TermLookup", "term_hash"]

CHUNK_DOCS = 10_000
"""Documents per chunk of the build (its arrays hold each token of them once, a few 8-byte words per token)."""
BLOCK_POSTINGS = 2_000_000
"""Postings per block of terms merged and written at once."""

log = logging.getLogger(__name__)


def term_hash(term: str) -> int:
    """The 64-bit key of a term in ``term_hashes`` (blake2b, 8 bytes, little-endian)."""
    return int.from_bytes(hashlib.blake2b(term.encode(), digest_size=8).digest(), "little")


class TermLookup(Mapping[str, int]):
    """Term → id over the vocabulary's files (read with ``pread``, :mod:`.mapped`); iterates the terms in id order
    (of first appearance)."""

    def __init__(self, terms: ArrayFile, offsets: ArrayFile, hashes: SortedFile, ids: ArrayFile):
        self._terms, self._offsets, self._hashes, self._ids = terms, offsets, hashes, ids
        self._find = functools.lru_cache(maxsize=1 << 16)(self._search)  # queries repeat their words

    def term(self, i: int) -> str:
        start, end = self._offsets.span(i)
        return self._terms.slice(start, end - 1).tobytes().decode()

    def _search(self, term: str) -> int | None:
        key = np.uint64(term_hash(term))
        j = self._hashes.searchsorted(key)
        while j < len(self._hashes) and self._hashes.item(j) == key:  # a collision of 64-bit keys: compare the terms
            i = int(self._ids.item(j))
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
    """The files of one index (see the module docstring): :meth:`scores` of a token list."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.indptr, self.docs, self.data = (ArrayFile(folder / f"{name}.npy") for name in ("indptr", "docs", "data"))
        self.vocab = TermLookup(
            ArrayFile(folder / "terms.npy"),
            ArrayFile(folder / "term_offsets.npy"),
            SortedFile(folder / "term_hashes.npy"),
            ArrayFile(folder / "term_ids.npy"),
        )
        self.num_docs = int(json.loads((folder / "meta.json").read_text())["num_docs"])

    @classmethod
    def load(cls, folder: Path) -> BM25Index:
        return cls(Path(folder))

    @classmethod
    def build(
        cls, documents: Iterable[Sequence[str]], folder: Path | None = None, k1: float = 0.9, b: float = 0.4
    ) -> BM25Index:
        """Index ``documents`` into ``folder`` (a new one; without it, a temporary folder removed once opened)."""
        own = folder is None
        out = Path(tempfile.mkdtemp(prefix="sapo-bm25-")) if own else Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        try:
            _Builder(out, k1, b).run(documents)
            return cls(out)
        finally:
            if own:  # open files stay readable after their names are gone
                shutil.rmtree(out, ignore_errors=True)

    def scores_of_ids(self, ids: Sequence[int]) -> np.ndarray:
        """float32 scores of every document: the sum of the terms' scores (by term id), in query order."""
        total = np.zeros(self.num_docs, dtype=np.float32)
        for i in ids:
            start, end = self.indptr.span(i)
            docs = self.docs.slice(start, end).astype(np.intp)  # once: numpy would widen int32 ids for both get and set
            total[docs] += self.data.slice(start, end)  # a term lists each document once
        return total

    def scores(self, tokens: Sequence[str]) -> np.ndarray:
        """float32 scores of every document for ``tokens`` (unknown tokens add nothing)."""
        return self.scores_of_ids([i for i in (self.vocab.get(t) for t in tokens) if i is not None])


class _Builder:
    """The passes of :meth:`BM25Index.build`: each chunk's counts to disk, then the postings merged by term blocks.

    Term ids are given in order of first appearance (the storage order: the scores do not depend on it), so a
    chunk's counts, sorted by (term, document), are already in the index's order; the postings of a block of
    terms are the concatenation of the chunks' runs for those terms, each chunk's documents after the last's."""

    def __init__(self, folder: Path, k1: float, b: float):
        self.folder, self.k1, self.b = folder, k1, b
        self.chunks = Path(tempfile.mkdtemp(prefix=".chunks-", dir=folder))
        self.ids: dict[str, int] = {}
        self.lengths = array("q")
        self.df = np.zeros(0, dtype=np.int64)
        self.n_chunks = 0

    def run(self, documents: Iterable[Sequence[str]]) -> None:
        try:
            ids, terms, start = self.ids, array("q"), len(self.lengths)
            for doc in documents:
                terms.extend([ids.setdefault(t, len(ids)) for t in doc])
                self.lengths.append(len(doc))
                if len(self.lengths) - start == CHUNK_DOCS:
                    self._count(terms, start)
                    terms, start = array("q"), len(self.lengths)
                    if start % PROGRESS_EVERY == 0:
                        log.info("BM25 index: %d documents counted", start)
            self._count(terms, start)
            log.info(
                "BM25 index: %d documents counted, %d terms; writing the postings", len(self.lengths), len(self.ids)
            )
            self._write()
        finally:
            shutil.rmtree(self.chunks, ignore_errors=True)

    def _count(self, terms: array, start: int) -> None:
        """One chunk's (term, document) pairs sorted, with their counts, to disk; the document frequencies updated."""
        if len(self.lengths) == start:
            return
        term = np.frombuffer(terms, dtype=np.int64) if len(terms) else np.zeros(0, dtype=np.int64)
        doc = np.repeat(
            np.arange(start, len(self.lengths), dtype=np.int64), np.frombuffer(self.lengths, np.int64)[start:]
        )
        pairs, tf = np.unique((term << 32) | doc, return_counts=True)  # sorted by term, then document
        chunk_terms = (pairs >> 32).astype(np.int32)
        for name, values in (
            ("term", chunk_terms),
            ("doc", (pairs & 0xFFFFFFFF).astype(np.int32)),
            ("tf", tf.astype(np.int32)),
        ):
            values.tofile(self.chunks / f"{self.n_chunks}-{name}.bin")
        if len(self.df) < len(self.ids):
            self.df = np.concatenate([self.df, np.zeros(len(self.ids) - len(self.df), dtype=np.int64)])
        counts = np.bincount(chunk_terms)
        self.df[: len(counts)] += counts
        self.n_chunks += 1

    def _write(self) -> None:
        vocab, df = list(self.ids), self.df
        self.ids = {}
        n, lengths = (
            len(self.lengths),
            np.frombuffer(self.lengths, dtype=np.int64) if self.lengths else np.zeros(0, np.int64),
        )
        idf_of = {int(f): np.float32(math.log(1 + (n - int(f) + 0.5) / (int(f) + 0.5))) for f in np.unique(df)}
        idf = np.array([idf_of[int(f)] for f in df], dtype=np.float32)
        avgdl = float(lengths.mean()) if n else 1.0  # as bm25s: the exact integer sum over n, in float64
        with np.errstate(divide="ignore", invalid="ignore"):  # avgdl 0: every document empty, no posting reads norm
            norm = self.k1 * ((1 - self.b) + self.b * lengths.astype(np.float64) / avgdl)  # bm25s's operation order
        indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        self._postings(idf, norm, indptr)
        np.save(self.folder / "indptr.npy", indptr)
        _save_vocab(self.folder, vocab)
        (self.folder / "meta.json").write_text(
            json.dumps({"num_docs": n, "terms": len(vocab), "k1": self.k1, "b": self.b})
        )

    def _read(self, k: int, name: str, lo: int = 0, hi: int = -1) -> np.ndarray:
        """Items ``lo:hi`` of chunk ``k``'s ``name`` array (all of it by default), read from its file, not mapped (a
        map would keep every chunk page it touched in the process's memory until the end of the build)."""
        path = self.chunks / f"{k}-{name}.bin"
        return np.fromfile(path, dtype=np.int32, count=hi - lo if hi >= 0 else -1, offset=4 * lo)

    def _postings(self, idf: np.ndarray, norm: np.ndarray, indptr: np.ndarray) -> None:
        """The postings, by term then document, written block by block (each block about BLOCK_POSTINGS)."""
        nnz, vocab = int(indptr[-1]), len(indptr) - 1
        edges = np.unique(
            np.concatenate([[0], np.searchsorted(indptr, np.arange(BLOCK_POSTINGS, nnz, BLOCK_POSTINGS)), [vocab]])
        )
        at = [
            np.searchsorted(self._read(k, "term"), edges).tolist() for k in range(self.n_chunks)
        ]  # each chunk's blocks
        with open(self.folder / "docs.npy", "wb") as f_docs, open(self.folder / "data.npy", "wb") as f_data:
            for fh, dtype in ((f_docs, np.int32), (f_data, np.float32)):
                np.lib.format.write_array_header_1_0(
                    fh,
                    {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": (nnz,)},
                )
            for b in range(len(edges) - 1):
                term, doc, tf = (
                    np.concatenate([self._read(k, name, at[k][b], at[k][b + 1]) for k in range(self.n_chunks)])
                    for name in ("term", "doc", "tf")
                )
                order = np.argsort(term, kind="stable")  # by term; each term's runs stay in chunk (document) order
                term, doc, tf64 = term[order], doc[order], tf[order].astype(np.float64)
                f_docs.write(doc.tobytes())
                f_data.write((idf[term].astype(np.float64) * (tf64 / (norm[doc] + tf64))).astype(np.float32).tobytes())


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
