"""Documents through the running appliance: upload, index, ask with citations, read a whole document."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gradio_client import handle_file

from app.knowledge.answer import NOTHING_FOUND
from tests.documents import ZH, encrypted
from tests.gradio_api import Client
from tests.harness import Appliance, api_client, wait_until
from tests.library import PASSWORD, handbook

HANDBOOK = "quartet-handbook.pdf"  # four pages: box, cabling, cooling, troubleshooting
ENCRYPTED = "quartet-handbook-locked.pdf"
CHINESE = ZH / "rpc-deployment.txt"


def indexed(c: Client, *names: str) -> list[dict[str, Any]]:
    def settled() -> list[dict[str, Any]] | None:
        docs = {d["name"]: d for d in c.predict(api_name="/documents")}
        wanted = [docs.get(n) for n in names]
        return wanted if all(d and d["status"] in ("ok", "error") for d in wanted) else None  # type: ignore[return-value]

    found: list[dict[str, Any]] = wait_until(settled, timeout=180, every=0.5)
    return found


@pytest.fixture(scope="module")
def library(appliance: Appliance, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("uploads")
    (folder / HANDBOOK).write_bytes(handbook())
    (folder / ENCRYPTED).write_bytes(encrypted(handbook(), PASSWORD))
    c = api_client(appliance.url)
    files = [folder / HANDBOOK, folder / ENCRYPTED, CHINESE]
    statuses = c.predict([handle_file(str(p)) for p in files], api_name="/ingest")[0]
    assert [s["status"] for s in statuses] == ["queued"] * 3
    return {d["name"]: d for d in indexed(c, HANDBOOK, ENCRYPTED, CHINESE.name)}


def test_uploaded_files_are_indexed_with_their_pages(library: dict[str, dict[str, Any]]) -> None:
    book = library[HANDBOOK]
    assert (book["status"], book["pages"]) == ("ok", 4) and book["chunks"] > 0
    assert library[CHINESE.name]["status"] == "ok"
    locked = library[ENCRYPTED]
    assert locked["status"] == "error" and locked["error_kind"] == "encrypted"
    assert "password" in locked["error"].lower()


def test_an_answer_streams_with_sources_that_name_file_and_page(
    appliance: Appliance, library: dict[str, dict[str, Any]]
) -> None:
    c = api_client(appliance.url)
    job = c.submit("At what temperature do the cards throttle?", [library[HANDBOOK]["id"]], api_name="/ask")
    updates = list(job)
    answer, sources = job.result()
    assert len(updates) > 2 and answer.strip()
    assert sources, "no source was offered"
    assert {s["file"] for s in sources} == {HANDBOOK}
    assert all(1 <= s["page"] <= 4 for s in sources)
    assert any("throttle at 85" in s["text"] and s["page"] == 3 for s in sources)


def test_a_real_pdf_is_indexed_and_cited(appliance: Appliance, corpus: Path) -> None:
    """The real-world layer: a pdflatex document from the corpus, uploaded and asked about."""
    blind_text = corpus / "pdf" / "pdflatex-4-pages.pdf"
    c = api_client(appliance.url)
    c.predict([handle_file(str(blind_text))], api_name="/ingest")
    doc = indexed(c, blind_text.name)[0]
    assert (doc["status"], doc["pages"]) == ("ok", 4)
    sources = c.submit("What does a blind text give you information about?", [doc["id"]], api_name="/ask").result()[1]
    assert sources and {s["file"] for s in sources} == {blind_text.name}
    assert all(1 <= s["page"] <= 4 for s in sources) and any("font" in s["text"] for s in sources)


def test_chinese_questions_find_chinese_passages(appliance: Appliance, library: dict[str, dict[str, Any]]) -> None:
    c = api_client(appliance.url)
    sources = c.submit("RPC 服务器是怎么部署的？", [library[CHINESE.name]["id"]], api_name="/ask").result()[1]
    assert sources and all(s["file"] == CHINESE.name for s in sources)
    assert any("RPC" in s["text"] for s in sources)


def test_a_question_the_documents_cannot_answer_says_so(
    appliance: Appliance, library: dict[str, dict[str, Any]]
) -> None:
    c = api_client(appliance.url)
    answer, sources = c.submit("Which football club won the 1954 World Cup final?", [], api_name="/ask").result()
    assert answer == NOTHING_FOUND and sources == []


def test_a_whole_document_is_read_part_by_part(appliance: Appliance, library: dict[str, dict[str, Any]]) -> None:
    c = api_client(appliance.url)
    job = c.submit(library[HANDBOOK]["id"], "", api_name="/summarize")
    progress = [p for _, p in job]
    answer, last = job.result()
    assert any(p.startswith("reading part 1 of") for p in progress)
    assert last == "writing the answer" and answer.strip()
    # knowledge.summary_answer_tokens (96 in tests/harness.py; 400 by default) caps the answer: no more words
    assert len(answer.split()) <= 96, f"{len(answer.split())} words: {answer!r}"


def test_a_document_that_failed_cannot_be_summarised(appliance: Appliance, library: dict[str, dict[str, Any]]) -> None:
    from gradio_client.exceptions import AppError

    c = api_client(appliance.url)
    with pytest.raises(AppError, match="not indexed"):
        c.predict(library[ENCRYPTED]["id"], "", api_name="/summarize")


def test_an_encrypted_pdf_opens_with_its_password(appliance: Appliance, library: dict[str, dict[str, Any]]) -> None:
    c = api_client(appliance.url)
    locked = library[ENCRYPTED]
    assert locked["error_kind"] == "encrypted"
    c.predict(locked["id"], PASSWORD, api_name="/unlock")
    opened = wait_until(
        lambda: (
            (d := next(d for d in c.predict(api_name="/documents") if d["id"] == locked["id"]))
            and d["status"] == "ok"
            and d
        ),
        timeout=90,
        every=0.5,
    )
    assert opened["pages"] >= 1 and opened["chunks"] > 0
