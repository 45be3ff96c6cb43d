"""Hybrid search: nearest vectors and BM25 full-text matches, fused by reciprocal rank.

Each side proposes `candidates` chunks; a chunk's score is the sum over the sides of
weight / (60 + rank). The vector side's weight is the square of the share of the question the
embedder can read: MiniLM's English vocabulary lacks most Chinese characters, and a vector made of
[UNK] pieces would only add noise to good full-text matches.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np

from app.knowledge.embedder import Embedder
from app.knowledge.fts import text_search
from app.knowledge.store import KnowledgeStore

_RRF_K = 60


@dataclass(frozen=True)
class Hit:
    chunk_id: int
    document_id: int
    path: str
    name: str
    page: int
    start: int  # character offsets of the chunk in the page's text (for highlighting)
    end: int
    text: str
    score: float
    vector_rank: int | None  # 1-based rank on each side, None when that side did not find it
    text_rank: int | None
    ocr: float | None = None  # the chunk was read by OCR, with this confidence (0–1)


def hybrid_search(
    store: KnowledgeStore,
    embedder: Embedder,
    query: str,
    *,
    k: int = 5,
    document_ids: Sequence[int] | None = None,
    collection: str | None = None,
    candidates: int = 50,
    pool: Executor | None = None,
) -> list[Hit]:
    """The `k` best chunks for `query`; with a `pool`, the full-text side runs beside the vector side."""
    if not query.strip() or k <= 0:
        return []
    scope = None
    if document_ids is not None or collection is not None:
        scope = store.document_ids(collection=collection, ids=document_ids)
        if not scope:
            return []
    vector = embedder.embed([query])[0]
    weight = embedder.readable_share(query) ** 2
    return fused_search(store, query, vector, vector_weight=weight, k=k, scope=scope, candidates=candidates, pool=pool)


def fused_search(
    store: KnowledgeStore,
    query: str,
    vector: np.ndarray,
    *,
    vector_weight: float,
    k: int,
    scope: set[int] | None,
    candidates: int = 50,
    pool: Executor | None = None,
) -> list[Hit]:
    """The retrieval part of `hybrid_search`, for a query whose vector is already known."""
    text_side = pool.submit(text_search, store, query, limit=candidates, documents=scope) if pool else None
    vectors = store.ensure_vectors()
    by_vector = [cid for cid, _ in vectors.search(vector, limit=candidates, documents=scope)]
    by_text = text_side.result() if text_side else text_search(store, query, limit=candidates, documents=scope)
    return _fuse(store, by_vector, by_text, k=k, vector_weight=vector_weight)


def _fuse(
    store: KnowledgeStore, by_vector: list[int], by_text: list[int], *, k: int, vector_weight: float
) -> list[Hit]:
    scores: dict[int, float] = {}
    for rank, cid in enumerate(by_vector, start=1):
        scores[cid] = scores.get(cid, 0.0) + vector_weight / (_RRF_K + rank)
    for rank, cid in enumerate(by_text, start=1):
        scores[cid] = scores.get(cid, 0.0) + 1.0 / (_RRF_K + rank)
    best = sorted(scores, key=lambda cid: -scores[cid])[:k]
    chunks = store.chunks_by_id(best)
    vector_rank = {cid: r for r, cid in enumerate(by_vector, start=1)}
    text_rank = {cid: r for r, cid in enumerate(by_text, start=1)}
    documents = {}
    hits = []
    for cid in best:
        chunk = chunks.get(cid)
        if chunk is None:  # deleted between the two queries
            continue
        if chunk.document_id not in documents:
            documents[chunk.document_id] = store.document(chunk.document_id)
        doc = documents[chunk.document_id]
        if doc is None:
            continue
        hits.append(
            Hit(cid, doc.id, doc.path, doc.name, chunk.page, chunk.start, chunk.end, chunk.text, scores[cid],
                vector_rank.get(cid), text_rank.get(cid), chunk.ocr)
        )  # fmt: skip
    return hits
