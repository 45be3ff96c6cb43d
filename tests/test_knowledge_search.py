"""The two sides of search on their own: full-text terms and the in-memory vector index."""

from __future__ import annotations

import numpy as np

from app.knowledge.fts import terms
from app.knowledge.vectors import VectorIndex


def test_question_terms_for_the_trigram_index() -> None:
    long_terms, short_terms = terms("What is the memory bandwidth of the RK1828?")
    assert long_terms == ["memory", "bandwidth", "rk1828"] and short_terms == []
    long_terms, _ = terms("Q4_K_M 量化是什么？llama.cpp")
    assert long_terms == ["q4_k_m", "llama.cpp"], "Chinese runs shorter than 3 characters give no trigram term"
    long_terms, short_terms = terms("内存带宽是多少")
    assert long_terms == ["内存带", "存带宽", "内存带宽"] and short_terms == []
    assert terms("散热") == ([], ["散热"])
    assert terms("Deﬁnition") == (["definition"], []), "ligatures are normalised like PDF text"


def test_vector_index_updates_per_document_and_filters() -> None:
    rng = np.random.default_rng(7)
    index = VectorIndex()
    assert index.search(np.ones(4, dtype=np.float32), limit=3) == []
    vectors = rng.normal(size=(6, 4)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index.load([(1, np.array([10, 11, 12]), vectors[:3]), (2, np.array([20, 21, 22]), vectors[3:])])
    assert [cid for cid, _ in index.search(vectors[4], limit=1)] == [21]
    assert all(cid < 20 for cid, _ in index.search(vectors[4], limit=3, documents={1}))
    index.drop(2)
    assert len(index) == 3 and 21 not in [cid for cid, _ in index.search(vectors[4], limit=6)]
    index.put(3, np.array([30]), vectors[4:5])
    best, score = index.search(vectors[4], limit=1)[0]
    assert best == 30 and abs(score - 1.0) < 1e-5
