"""The real-world corpus beside the checkout, indexed once with the real MiniLM: statuses, retrieval quality,
citations. An extra layer over tests/test_knowledge_library.py (the same checks on documents the tests make):
every test here is skipped, naming the missing folder, where the corpus is absent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.database import Database
from app.knowledge.embedder import Embedder
from app.knowledge.service import KnowledgeService
from app.knowledge.store import DocumentInfo

QUESTIONS = Path(__file__).parent / "data" / "knowledge" / "questions.json"
ERRORS = {
    "libreoffice-writer-password.pdf": "encrypted",
    "unreadablemetadata.pdf": "corrupt",
    "files.json": "unsupported",
}


pytestmark = pytest.mark.embedder


@pytest.fixture(scope="module")
def pdfs(corpus: Path) -> Path:
    return corpus / "pdf"


@pytest.fixture(scope="module")
def zh(corpus: Path) -> Path:
    return corpus / "zh"


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory, pdfs: Path, zh: Path) -> Iterator[KnowledgeService]:
    folder = tmp_path_factory.mktemp("corpus-index")
    service = KnowledgeService(Database(folder / "kb.db"), Embedder.packaged(), kb_dir=None)
    service.start()
    assert service.ingest_paths([pdfs, zh]) == len(list(pdfs.iterdir())) + len(list(zh.iterdir()))
    assert service.wait_idle(600), "indexing the corpus took more than 10 minutes"
    yield service
    service.stop()


def by_name(kb: KnowledgeService) -> dict[str, DocumentInfo]:
    return {d.name: d for d in kb.documents()}


def test_every_corpus_file_gets_the_right_status(kb: KnowledgeService, pdfs: Path, zh: Path) -> None:
    declared = {Path(f["path"]).name: f["pages"] for f in json.loads((pdfs / "files.json").read_text())["data"]}
    docs = {d.name: d for d in kb.documents()}
    assert set(docs) == {p.name for p in [*pdfs.iterdir(), *zh.iterdir()]}
    for name, doc in docs.items():
        if name in ERRORS:
            assert (doc.status, doc.error_kind) == ("error", ERRORS[name]), name
            assert doc.error and name in doc.error and doc.chunk_count == 0
            continue
        assert doc.status == "ok" and doc.chunk_count > 0 and doc.error is None, (name, doc.error)
        if name in declared:
            assert doc.pages_total == declared[name], (
                f"{name}: {doc.pages_total} pages, files.json says {declared[name]}"
            )
    images = docs["imagemagick-images.pdf"]
    assert images.note and "pages 4, 5" in images.note and "not even read by OCR" in images.note  # pictures, no text
    assert docs["GeoTopo-komprimiert.pdf"].pages_total == 117


def test_retrieval_finds_the_right_page_for_nine_questions_in_ten(kb: KnowledgeService) -> None:
    questions = json.loads(QUESTIONS.read_text(encoding="utf-8"))["questions"]
    assert len(questions) >= 30
    ids = {d.name: d.id for d in kb.documents()}
    found, missed = 0, []
    for q in questions:
        answers = {(Path(q["file"]).name, q["page"])} | {(Path(a["file"]).name, a["page"]) for a in q.get("also", [])}
        page = kb.page_text(ids[Path(q["file"]).name], q["page"])
        assert page is not None and q["evidence"] in page, f"the question set is wrong about {q['question']}"
        hits = kb.search(q["question"], k=5)
        if answers & {(h.name, h.page) for h in hits}:
            found += 1
        else:
            missed.append((q["question"], [(h.name, h.page) for h in hits]))
    rate = found / len(questions)
    print(f"retrieval: right page in the top 5 for {found}/{len(questions)} questions ({rate:.0%})")
    assert rate >= 0.9, missed


def test_hits_cite_a_page_and_the_exact_place_on_it(kb: KnowledgeService) -> None:
    hits = kb.search("What is the area of Finland?", k=3)
    assert hits and hits[0].name == "multicolumn.pdf" and hits[0].page == 3
    for hit in hits:
        page = kb.page_text(hit.document_id, hit.page)
        assert page is not None and page[hit.start : hit.end] == hit.text
    assert kb.page_text(hits[0].document_id, 99) is None


def test_search_within_documents_or_a_collection(kb: KnowledgeService) -> None:
    ids = {d.name: d.id for d in kb.documents()}
    only = [ids["rk1828-pcie-engineering.txt"]]
    hits = kb.search("RK1828 内存带宽", k=5, document_ids=only)
    assert hits and {h.document_id for h in hits} == set(only)
    assert kb.search("RK1828", k=5, collection="no such collection") == []
    assert len(kb.search("RK1828", k=5, collection="default")) == 5
    assert kb.search("   ", k=5) == []


def test_one_and_two_character_chinese_queries_still_find_text(kb: KnowledgeService) -> None:
    """The trigram index needs three characters; shorter Chinese queries fall back to a scan."""
    hits = kb.search("散热", k=5)
    assert hits and all(h.name.endswith(".txt") for h in hits[:3])
    assert any("散热" in h.text for h in hits)


def test_document_chunks_come_in_reading_order(kb: KnowledgeService) -> None:
    doc = by_name(kb)["pdflatex-4-pages.pdf"]
    chunks = kb.document_chunks(doc.id)
    assert len(chunks) == doc.chunk_count
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    assert [c.page for c in chunks] == sorted(c.page for c in chunks) and chunks[-1].page == 4


def test_indexing_the_corpus_again_changes_nothing(kb: KnowledgeService, pdfs: Path, zh: Path) -> None:
    before = {d.id: (d.sha256, d.chunk_count, d.indexed_at) for d in kb.documents()}
    chunks_before = [c.id for c in kb.document_chunks(by_name(kb)["crazyones-pdfa.pdf"].id)]
    queued = kb.ingest_paths([pdfs, zh])
    assert kb.wait_idle(120)
    assert {d.id: (d.sha256, d.chunk_count, d.indexed_at) for d in kb.documents()} == before
    assert [c.id for c in kb.document_chunks(by_name(kb)["crazyones-pdfa.pdf"].id)] == chunks_before
    outcomes = {p.state for p in kb.progress().finished[:queued]}
    assert outcomes == {"unchanged"}, outcomes
