"""All embeddings of one model in memory, searched with one matrix product.

Blocks are kept per document, so a write replaces one block instead of reloading everything; the
stacked matrix is rebuilt lazily on the next search after a change. Vectors are unit length, so the
dot product is the cosine similarity. (At 100k chunks × 384 dims the matrix is 150 MB and a query
costs a few milliseconds; sqlite-vec is not needed at this scale.)
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import numpy as np

Block = tuple[int, np.ndarray, np.ndarray]  # (document id, chunk ids int64 (n,), vectors float32 (n, dim))


class VectorIndex:
    def __init__(self) -> None:
        self._blocks: dict[int, tuple[np.ndarray, np.ndarray]] | None = None  # None: not loaded yet
        self._stacked: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._blocks is not None

    def load(self, blocks: Iterable[Block]) -> None:
        with self._lock:
            self._blocks = {doc: (ids, matrix) for doc, ids, matrix in blocks}
            self._stacked = None

    def put(self, document_id: int, chunk_ids: np.ndarray, matrix: np.ndarray) -> None:
        with self._lock:
            if self._blocks is not None:
                self._blocks[document_id] = (chunk_ids.astype(np.int64), matrix.astype(np.float32, copy=False))
                self._stacked = None

    def drop(self, document_id: int) -> None:
        with self._lock:
            if self._blocks is not None and self._blocks.pop(document_id, None) is not None:
                self._stacked = None

    def __len__(self) -> int:
        with self._lock:
            return sum(len(ids) for ids, _ in (self._blocks or {}).values())

    def search(self, query: np.ndarray, *, limit: int, documents: set[int] | None = None) -> list[tuple[int, float]]:
        """The `limit` nearest chunks as (chunk id, cosine), best first, within `documents` if given."""
        chunk_ids, doc_ids, matrix = self._matrix()
        if not len(chunk_ids) or limit <= 0:
            return []
        scores = matrix @ query.astype(np.float32)
        if documents is not None:
            scores = np.where(np.isin(doc_ids, np.fromiter(documents, dtype=np.int64)), scores, -np.inf)
        limit = min(limit, len(scores))
        top = np.argpartition(-scores, limit - 1)[:limit]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(chunk_ids[i]), float(scores[i])) for i in top if np.isfinite(scores[i])]

    def _matrix(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        with self._lock:
            if self._stacked is None:
                blocks = self._blocks or {}
                if not blocks:
                    empty = np.zeros(0, dtype=np.int64)
                    self._stacked = (empty, empty, np.zeros((0, 1), dtype=np.float32))
                else:
                    ids = np.concatenate([ids for ids, _ in blocks.values()])
                    docs = np.concatenate([np.full(len(i), d, dtype=np.int64) for d, (i, _) in blocks.items()])
                    self._stacked = (ids, docs, np.vstack([m for _, m in blocks.values()]))
            return self._stacked
