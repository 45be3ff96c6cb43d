"""The vector index on real numpy data: exact below the threshold, signs and a re-rank above it
(recall against a brute-force scan), writes searchable at once, document filters honoured."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from app.knowledge.vectors import VectorIndex

DIM = 384
Blocks = list[tuple[int, np.ndarray, np.ndarray]]


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def topic_mixture(n: int, rng: np.random.Generator) -> np.ndarray:
    """Unit vectors shaped like sentence embeddings: a shared direction, topics, subtopics of ~20
    vectors, noise. (Uniformly random vectors have no neighbours worth the name: their top 50 are
    noise that only an exact scan finds.) Tuned to be a little harder for the index than real MiniLM
    embeddings of documentation paragraphs: the share of the exact top 50 found with 1 / 2 / 5 % of
    the vectors re-ranked is 0.74 / 0.89 / 0.98 here vs 0.80 / 0.91 / 0.98 for them at 10k vectors,
    0.92 / 0.97 / 0.99 vs 0.95 / 0.98 / 1.00 at 30k."""
    subtopics = n // 20
    topics = unit(rng.normal(size=(max(1, subtopics // 20), DIM)))
    centres = 0.8 * topics[rng.integers(0, len(topics), subtopics)] + 0.7 * unit(rng.normal(size=(subtopics, DIM)))
    shared = unit(rng.normal(size=DIM))
    noise = 1.3 * rng.normal(size=(n, DIM)) / np.sqrt(DIM)
    return unit(0.45 * shared + unit(centres)[rng.integers(0, subtopics, n)] + noise)


def blocks(matrix: np.ndarray, *, first_doc: int = 1) -> Blocks:
    """1,000 rows a document; chunk id = 100,000 × document + row."""
    return [
        (doc, doc * 100_000 + np.arange(len(part), dtype=np.int64), part)
        for doc, part in enumerate(np.split(matrix, range(1000, len(matrix), 1000)), start=first_doc)
    ]


def brute_force(data: Blocks, queries: np.ndarray, limit: int) -> list[list[int]]:
    """The exact top `limit` chunk ids of each query."""
    ids = np.concatenate([ids for _, ids, _ in data])
    scores = queries @ np.vstack([m for _, _, m in data]).T
    return [[int(ids[i]) for i in np.argsort(-row, kind="stable")[:limit]] for row in scores]


def exact_top(data: Blocks, query: np.ndarray, limit: int) -> list[int]:
    return brute_force(data, query[None, :], limit)[0]


def recall(index: VectorIndex, data: Blocks, queries: np.ndarray, documents: set[int] | None = None) -> float:
    found = []
    for query, exact in zip(queries, brute_force(data, queries, 50), strict=True):
        found.append(len(set(exact) & {cid for cid, _ in index.search(query, limit=50, documents=documents)}) / 50)
    return float(np.mean(found))


@pytest.fixture(scope="module")
def mixture() -> tuple[Blocks, np.ndarray]:
    """30k vectors in 30 documents, and 60 queries drawn like them."""
    vectors = topic_mixture(30_060, np.random.default_rng(1828))
    return blocks(vectors[:30_000]), vectors[30_000:]


@pytest.fixture
def index(mixture: tuple[Blocks, np.ndarray]) -> VectorIndex:
    index = VectorIndex()
    index.load(mixture[0])
    assert index.approximate
    return index


def test_small_index_is_exact() -> None:
    rng = np.random.default_rng(5)
    data = blocks(unit(rng.normal(size=(5000, DIM))))
    index = VectorIndex()
    index.load(data)
    for query in unit(rng.normal(size=(20, DIM))):
        found = index.search(query, limit=50)
        assert [cid for cid, _ in found] == exact_top(data, query, 50)
        assert np.allclose([s for _, s in found], np.sort(np.vstack([m for _, _, m in data]) @ query)[::-1][:50])


@pytest.mark.slow
def test_large_index_finds_what_the_exact_scan_finds(index: VectorIndex, mixture: tuple[Blocks, np.ndarray]) -> None:
    data, queries = mixture
    assert recall(index, data, queries) >= 0.95
    found = index.search(queries[0], limit=50)
    assert [s for _, s in found] == sorted((s for _, s in found), reverse=True), "best first"
    narrow = VectorIndex(rerank_share=0.005, rerank_min=50)
    narrow.load(data)
    assert recall(narrow, data, queries[:20]) < 0.9, "the test data is hard enough to tell a good re-rank share"


def test_planted_near_duplicates_come_first(index: VectorIndex) -> None:
    rng = np.random.default_rng(9)
    seeds = unit(rng.normal(size=(5, DIM)))
    for doc, seed in enumerate(seeds, start=100):
        index.put(doc, doc * 100_000 + np.arange(20), unit(seed + 0.6 * rng.normal(size=(20, DIM)) / np.sqrt(DIM)))
    for doc, seed in enumerate(seeds, start=100):
        assert {cid // 100_000 for cid, _ in index.search(seed, limit=20)} == {doc}


def test_writes_are_searchable_at_once(index: VectorIndex, mixture: tuple[Blocks, np.ndarray]) -> None:
    data, queries = mixture
    index.put(99, np.array([9_900_000, 9_900_001]), unit(queries[:2]))
    assert [index.search(q, limit=1)[0][0] for q in queries[:2]] == [9_900_000, 9_900_001]
    changed, ids, matrix = data[4]
    index.put(changed, ids + 50_000, matrix)  # the same document again, with new chunk ids
    hits = [cid for cid, _ in index.search(matrix[7], limit=5)]
    assert hits[0] == ids[7] + 50_000 and int(ids[7]) not in hits
    index.drop(changed)
    assert all(cid // 100_000 != changed for cid, _ in index.search(matrix[7], limit=50))
    index.drop(99)
    assert index.search(queries[0], limit=1)[0][0] < 9_900_000
    rest = [b for b in data if b[0] != changed]
    assert len(index) == 29_000 and recall(index, rest, queries) >= 0.95
    for doc, _, _ in rest[:11]:  # below the threshold again (exact), and over a quarter of the rows dead
        index.drop(doc)
    query = data[20][2][5]
    assert [cid for cid, _ in index.search(query, limit=50)] == exact_top(rest[11:], query, 50)
    for doc, ids, matrix in rest[:11]:  # and grown again
        index.put(doc, ids, matrix)
    assert len(index) == 29_000 and recall(index, rest, queries) >= 0.95


def test_document_filter(index: VectorIndex, mixture: tuple[Blocks, np.ndarray]) -> None:
    data, queries = mixture
    few = {3, 17}
    for query in queries[:10]:
        found = index.search(query, limit=50, documents=few)
        assert [cid for cid, _ in found] == exact_top([b for b in data if b[0] in few], query, 50)
    most = set(range(1, 26))
    in_most = [b for b in data if b[0] in most]
    for query in queries[:10]:
        assert {cid // 100_000 for cid, _ in index.search(query, limit=50, documents=most)} <= most
    assert recall(index, in_most, queries, documents=most) >= 0.95
    assert index.search(queries[0], limit=5, documents={12345}) == []


@pytest.mark.slow
def test_searches_beside_writes(index: VectorIndex, mixture: tuple[Blocks, np.ndarray]) -> None:
    data, queries = mixture
    stop = threading.Event()

    def write() -> None:
        while not stop.is_set():
            for doc, ids, matrix in data[:8]:
                index.drop(doc)
                index.put(doc, ids, matrix)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        for query in queries:  # each of the 60 once, every one while the writer churns
            found = index.search(query, limit=50)
            assert len(found) == 50 and len({cid for cid, _ in found}) == 50
            assert all(1 <= cid // 100_000 <= 30 for cid, _ in found)
    finally:
        stop.set()
        writer.join()
    assert recall(index, data, queries) >= 0.95
