"""All embeddings of one model in memory: exact below 20k vectors, sign bits and an exact re-rank above.

The vectors live in one growing matrix. A write appends a document's rows and marks its old rows dead,
so it costs what it writes (dead rows are dropped once they are a quarter of the matrix), and a search
reads a snapshot without holding the lock: rows are only ever added past the end a search saw, and
the live mask and a grown or compacted matrix are new arrays. Vectors are unit length, so the dot
product is the cosine similarity.

A search over fewer than `approximate_from` vectors is one matrix product over them: exact. Above,
that product is bound by memory bandwidth (100k × 384 float32 is 150 MB a query), so a search first
ranks every vector by the Hamming distance between its signs and the query's (48 bytes a vector,
4.8 MB at 100k), then scores the nearest 3 % (at least 1,000) exactly. Nothing is trained, so a
write is searchable at once and nothing is ever rebuilt; a document filter narrows both steps. On
real MiniLM embeddings (20k and 30k documentation paragraphs) this finds 99.4 % of the exact top 50
and all of the top 10; an IVF index (k-means cells) needed a quarter of the rows read to find 97 %.
docs/benchmarks.md has the speed.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Sequence

import numpy as np

Block = tuple[int, np.ndarray, np.ndarray]  # (document id, chunk ids int64 (n,), vectors float32 (n, dim))
APPROXIMATE_FROM = 20_000  # vectors a search covers; below, it is exact
RERANK_SHARE = 0.03  # of the vectors a search covers, the nearest by signs are scored exactly
RERANK_MIN = 1000  # ... and at least this many
_SLICE = 1024  # rows per matrix-vector product: OpenBLAS runs one this small on a single thread
_GATHER = 256  # scattered rows copied at a time into a small scratch matrix
_COMPACT_SHARE = 0.25  # drop dead rows once they are this share of the matrix
_GROWTH = 1.25


class VectorIndex:
    def __init__(
        self,
        *,
        approximate_from: int = APPROXIMATE_FROM,
        rerank_share: float = RERANK_SHARE,
        rerank_min: int = RERANK_MIN,
    ) -> None:
        self.approximate_from = approximate_from
        self.rerank_share = rerank_share
        self.rerank_min = rerank_min
        self._loaded = False
        self._lock = threading.Lock()
        self._empty()

    @property
    def loaded(self) -> bool:
        return self._loaded

    @property
    def approximate(self) -> bool:
        """Whether a search over the whole index is approximate (signs and a re-rank) rather than exact."""
        return self._count >= self.approximate_from

    def load(self, blocks: Iterable[Block]) -> None:
        blocks = [(doc, ids, matrix) for doc, ids, matrix in blocks if len(ids)]
        with self._lock:
            self._loaded = True
            self._empty()
            self._append(blocks)

    def put(self, document_id: int, chunk_ids: np.ndarray, matrix: np.ndarray) -> None:
        with self._lock:
            if self._loaded:
                self._kill(document_id)
                self._append([(document_id, chunk_ids, matrix)])

    def drop(self, document_id: int) -> None:
        with self._lock:
            if self._loaded:
                self._kill(document_id)

    def __len__(self) -> int:
        with self._lock:
            return self._count

    def search(self, query: np.ndarray, *, limit: int, documents: set[int] | None = None) -> list[tuple[int, float]]:
        """The `limit` nearest chunks as (chunk id, cosine), best first, within `documents` if given."""
        with self._lock:
            ids, docs, matrix, signs, live, size = (
                self._ids,
                self._docs,
                self._matrix,
                self._signs,
                self._live,
                self._size,
            )
            spans = None if documents is None else sorted(self._spans[d] for d in documents if d in self._spans)
            covered = self._count if spans is None else sum(end - start for start, end in spans)
        if limit <= 0 or not covered:
            return []
        query = query.astype(np.float32)
        if covered < self.approximate_from:
            if spans is None:
                return _best(ids, None, np.where(live[:size], _products(matrix[:size], None, query), -np.inf), limit)
            rows = np.concatenate([np.arange(start, end) for start, end in spans])
            return _best(ids, rows, _products(matrix, rows, query), limit)
        valid = live[:size] if spans is None else live[:size] & np.isin(docs[:size], list(documents or ()))
        want = max(limit, self.rerank_min, math.ceil(self.rerank_share * covered))
        rows = _nearest_signs(signs[:, :size], _sign_words(query[None, :])[:, 0], valid, want)
        return _best(ids, rows, _products(matrix, rows, query), limit)

    # -- storage, under the lock -------------------------------------------------------------------

    def _empty(self) -> None:
        """No rows, in new arrays (a search still reading the old ones is not disturbed)."""
        self._ids = np.zeros(0, dtype=np.int64)  # (capacity,) chunk ids
        self._docs = np.zeros(0, dtype=np.int64)  # (capacity,) document ids
        self._matrix = np.zeros((0, 0), dtype=np.float32)  # (capacity, dim)
        self._signs = np.zeros((0, 0), dtype=np.uint64)  # (words, capacity): bit i of a row is vector[i] > 0
        self._live = np.zeros(0, dtype=bool)  # (capacity,), replaced (never changed in place) on every write
        self._size = 0  # rows in use, dead ones included
        self._spans: dict[int, tuple[int, int]] = {}  # each document's live rows: [start, end)
        self._count = 0  # live rows

    def _append(self, blocks: Sequence[Block]) -> None:
        added = sum(len(ids) for _, ids, _ in blocks)
        if not added:
            return
        if self._size + added > len(self._ids):
            self._resize(added, dim=blocks[0][2].shape[1])
        live = self._live.copy()
        at = self._size
        for doc, ids, matrix in blocks:
            end = at + len(ids)
            self._ids[at:end], self._docs[at:end], self._matrix[at:end] = ids, doc, matrix
            self._signs[:, at:end] = _sign_words(matrix)
            live[at:end] = True
            self._spans[doc] = (at, end)
            at = end
        self._live, self._size, self._count = live, at, self._count + added

    def _kill(self, document_id: int) -> None:
        span = self._spans.pop(document_id, None)
        if span is not None:
            live = self._live.copy()
            live[span[0] : span[1]] = False
            self._live, self._count = live, self._count - (span[1] - span[0])
            if self._size - self._count > _COMPACT_SHARE * self._size:
                self._resize(0)

    def _resize(self, extra: int, *, dim: int | None = None) -> None:
        """New arrays holding the live rows, in order, with room for `extra` more and some to spare."""
        keep = np.flatnonzero(self._live[: self._size])
        n, capacity = len(keep), math.ceil((len(keep) + extra) * _GROWTH)
        dim = self._matrix.shape[1] if n else (dim or 0)
        ids, docs, live = np.zeros(capacity, np.int64), np.zeros(capacity, np.int64), np.zeros(capacity, bool)
        matrix = np.zeros((capacity, dim), dtype=np.float32)
        signs = np.zeros((math.ceil(dim / 64), capacity), dtype=np.uint64)
        if n:
            ids[:n], docs[:n], live[:n] = self._ids[keep], self._docs[keep], True
            matrix[:n], signs[:, :n] = self._matrix[keep], self._signs[:, keep]
        starts = np.searchsorted(keep, [start for start, _ in self._spans.values()]).tolist()
        spans = self._spans.items()
        self._spans = {doc: (new, new + end - start) for (doc, (start, end)), new in zip(spans, starts, strict=True)}
        self._ids, self._docs, self._matrix, self._signs, self._live, self._size = ids, docs, matrix, signs, live, n


def _sign_words(matrix: np.ndarray) -> np.ndarray:
    """(words, n) uint64: the signs of each row, 64 to a word (padded with zero bits)."""
    bits = np.packbits(matrix > 0, axis=1)
    bits = np.pad(bits, ((0, 0), (0, -bits.shape[1] % 8)))
    return np.ascontiguousarray(bits.view(np.uint64).T)


def _nearest_signs(signs: np.ndarray, query: np.ndarray, valid: np.ndarray, want: int) -> np.ndarray:
    """Rows of `valid` whose signs differ least from the query's: at least `want` of them (ties at the
    cut-off included), found with a histogram of the distances instead of a sort."""
    distance = np.bitwise_count(signs[0] ^ query[0]).astype(np.uint16)
    for word in range(1, len(signs)):
        distance += np.bitwise_count(signs[word] ^ query[word])
    never = 64 * len(signs) + 1
    distance[~valid] = never
    cut = int(np.searchsorted(np.cumsum(np.bincount(distance, minlength=never + 1)), want))
    return np.flatnonzero(distance <= min(cut, never - 1))


def _products(matrix: np.ndarray, rows: np.ndarray | None, query: np.ndarray) -> np.ndarray:
    """matrix[rows] @ query (every row when None) in slices small enough for OpenBLAS to run on one
    thread: on two, each waits for the other whenever the machine is busy (p95 several times worse),
    and the other core is the full-text side's. Scattered rows are copied a few at a time into a
    small scratch matrix rather than all at once."""
    out = np.empty(len(matrix) if rows is None else len(rows), dtype=np.float32)
    if rows is None:
        for at in range(0, len(out), _SLICE):
            np.matmul(matrix[at : at + _SLICE], query, out=out[at : at + _SLICE])
        return out
    scratch = np.empty((min(_GATHER, len(rows)), matrix.shape[1]), dtype=np.float32)
    for at in range(0, len(out), _GATHER):
        part = rows[at : at + _GATHER]
        np.take(matrix, part, axis=0, out=scratch[: len(part)])
        np.matmul(scratch[: len(part)], query, out=out[at : at + len(part)])
    return out


def _best(ids: np.ndarray, rows: np.ndarray | None, scores: np.ndarray, limit: int) -> list[tuple[int, float]]:
    """(chunk id, score) of the `limit` best finite scores of `rows` (every row when None), best first."""
    limit = min(limit, len(scores))
    if limit <= 0:
        return []
    top = np.argpartition(-scores, limit - 1)[:limit]
    top = top[np.argsort(-scores[top], kind="stable")]
    top = top[np.isfinite(scores[top])]
    return list(zip((ids[top] if rows is None else ids[rows[top]]).tolist(), scores[top].tolist(), strict=True))
