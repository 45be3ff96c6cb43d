"""A library the tests write (tests/library.py), indexed once with the real MiniLM: statuses, pages,
retrieval quality, citations, scoped search, short Chinese queries, idempotent re-indexing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.database import Database
from app.knowledge.embedder import Embedder
from app.knowledge.service import KnowledgeService
from app.knowledge.store import DocumentInfo
from tests.library import EXPECTED, QUESTIONS, write_library


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder.packaged()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_library(tmp_path_factory.mktemp("library") / "files")


@pytest.fixture(scope="module")
def kb(folder: Path, embedder: Embedder) -> Iterator[KnowledgeService]:
    service = KnowledgeService(Database(folder.parent / "kb.db"), embedder, kb_dir=None)
    service.start()
    assert service.ingest_paths([folder]) == len(EXPECTED)
    assert service.wait_idle(300), "indexing the library took more than 5 minutes"
    yield service
    service.stop()


def by_name(kb: KnowledgeService) -> dict[str, DocumentInfo]:
    return {d.name: d for d in kb.documents()}


def test_every_file_gets_the_right_status_and_page_count(kb: KnowledgeService, folder: Path) -> None:
    docs = by_name(kb)
    assert set(docs) == set(EXPECTED) == {p.name for p in folder.iterdir()}
    for name, (status, kind, pages) in EXPECTED.items():
        doc = docs[name]
        if status == "error":
            assert (doc.status, doc.error_kind) == ("error", kind), (name, doc.error)
            assert doc.error and name in doc.error and doc.chunk_count == 0
            continue
        assert doc.status == "ok" and doc.chunk_count > 0 and doc.error is None, (name, doc.error)
        assert doc.pages_total == pages, f"{name}: {doc.pages_total} pages, it was written with {pages}"
    scan = docs["delivery-scan.pdf"]
    assert scan.note and "pages 4, 5" in scan.note and "not even read by OCR" in scan.note  # grey images: no text
    assert docs["handbook.pdf"].note is None


def test_retrieval_finds_the_right_page_for_nine_questions_in_ten(kb: KnowledgeService) -> None:
    ids = {d.name: d.id for d in kb.documents()}
    found, missed = 0, []
    for q in QUESTIONS:
        page = kb.page_text(ids[q.file], q.page)
        assert page is not None and q.evidence in " ".join(page.split()), f"the question set is wrong: {q.question}"
        hits = kb.search(q.question, k=5)
        if (q.file, q.page) in {(h.name, h.page) for h in hits}:
            found += 1
        else:
            missed.append((q.question, [(h.name, h.page) for h in hits]))
    rate = found / len(QUESTIONS)
    print(f"retrieval: right page in the top 5 for {found}/{len(QUESTIONS)} questions ({rate:.0%})")
    assert rate >= 0.9, missed


def test_hits_cite_a_page_and_the_exact_place_on_it(kb: KnowledgeService) -> None:
    hits = kb.search("What is the area of Lake Saimaa?", k=3)
    assert hits and (hits[0].name, hits[0].page) == ("newsletter.pdf", 3)
    for hit in hits:
        page = kb.page_text(hit.document_id, hit.page)
        assert page is not None and page[hit.start : hit.end] == hit.text
    assert kb.page_text(hits[0].document_id, 99) is None


def test_search_within_documents_or_a_collection(kb: KnowledgeService) -> None:
    ids = {d.name: d.id for d in kb.documents()}
    only = [ids["cooling-and-pcie.txt"]]
    hits = kb.search("RK1828 加速卡的温度", k=5, document_ids=only)
    assert hits and {h.document_id for h in hits} == set(only)
    assert kb.search("RK1828", k=5, collection="no such collection") == []
    assert len(kb.search("RK1828", k=5, collection="default")) == 5
    assert kb.search("   ", k=5) == []


def test_one_and_two_character_chinese_queries_still_find_text(kb: KnowledgeService) -> None:
    """The trigram index needs three characters; shorter Chinese queries fall back to a scan."""
    for query in ("散热", "风"):
        hits = kb.search(query, k=5)
        assert hits and any(query in h.text for h in hits), query
        assert hits[0].name in ("cooling-and-pcie.txt", "document-search.txt"), (query, hits[0].name)


def test_document_chunks_come_in_reading_order(kb: KnowledgeService) -> None:
    doc = by_name(kb)["handbook.pdf"]
    chunks = kb.document_chunks(doc.id)
    assert len(chunks) == doc.chunk_count
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    assert [c.page for c in chunks] == sorted(c.page for c in chunks) and chunks[-1].page == 4


def test_indexing_the_library_again_changes_nothing(kb: KnowledgeService, folder: Path) -> None:
    before = {d.id: (d.sha256, d.chunk_count, d.indexed_at) for d in kb.documents()}
    chunks_before = [c.id for c in kb.document_chunks(by_name(kb)["newsletter.pdf"].id)]
    queued = kb.ingest_paths([folder])
    assert kb.wait_idle(120)
    assert {d.id: (d.sha256, d.chunk_count, d.indexed_at) for d in kb.documents()} == before
    assert [c.id for c in kb.document_chunks(by_name(kb)["newsletter.pdf"].id)] == chunks_before
    outcomes = {p.state for p in kb.progress().finished[:queued]}
    assert outcomes == {"unchanged"}, outcomes
