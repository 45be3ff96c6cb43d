"""Issue 22 items 13, 15 and 19 where a unit test holds them: what the Documents tab says once indexing is
over (failures counted and named), about a document an action of the page queued, a cut answer, a whole-
document answer's pages and sources line; sources numbered by distinct page; the admin's load progress and
log in words; an empty extraction cell flagged; a stopped run that read nothing says so."""

from __future__ import annotations

from app.extraction.store import Run
from app.knowledge.answer import Answer, numbered
from app.knowledge.ingest import FileProgress, IngestProgress
from app.knowledge.search import Hit
from app.knowledge.store import DocumentInfo
from app.knowledge.summary import grounded
from app.ui.documents_view import answer_md, fate_line, progress_line, source_choices

IDLE = IngestProgress([], [], 0, [])


def doc(name: str, status: str, *, error: str | None = None, pages: int = 0, chunks: int = 0) -> DocumentInfo:
    path, nothing = f"/kb/{name}", [None] * 7
    return DocumentInfo(1, path, name, "", status, None, error, None, 0, pages, chunks, *nothing)


def test_indexing_over_says_how_many_failed_and_why_not_all_indexed() -> None:
    docs = [doc("good.txt", "ok")] + [doc(f"broken{n}.pdf", "error", error=f"reason {n}") for n in range(4)]
    line = progress_line(IDLE, docs)
    assert "All documents are indexed" not in line
    assert line.startswith("1 indexed · ⚠ 4 could not be indexed")
    assert all(f"broken{n}.pdf" in line and f"reason {n}" in line for n in range(4)), line
    assert progress_line(IDLE, [doc("good.txt", "ok")]) == "All documents are indexed."


def test_a_queued_action_is_followed_beside_its_button() -> None:
    locked = doc("locked.pdf", "error", error="wrong password")
    waiting = IngestProgress([], [FileProgress("/kb/locked.pdf", "locked.pdf", "queued")], 1, [])
    assert fate_line(locked, waiting, "opening").startswith("⏳ queued — opening **locked.pdf**")
    assert fate_line(locked, IDLE, "opening") == "⚠ **locked.pdf** is not indexed: wrong password"
    done = fate_line(doc("a.pdf", "ok", pages=8, chunks=12), IDLE, "indexing again")
    assert done == "✅ **a.pdf** is indexed: 8 pages, 12 passages."


def hit(doc_id: int, page: int, text: str) -> Hit:
    return Hit(0, doc_id, f"/kb/{doc_id}.pdf", f"doc{doc_id}.pdf", page, 0, len(text), text, 0.9, 1, None)


def test_sources_are_numbered_by_distinct_page_not_by_passage() -> None:
    sources = numbered([hit(1, 2, "a"), hit(1, 2, "b"), hit(1, 2, "c"), hit(2, 5, "d")])
    assert [s.number for s in sources] == [1, 1, 1, 2]
    assert [label for label, _ in source_choices(sources)] == ["[1] doc1.pdf, page 2", "[2] doc2.pdf, page 5"]


def test_an_answer_cut_at_its_token_limit_says_so() -> None:
    shown = answer_md(Answer("The main point is the fil", done=True, cut=True))
    assert "cut at the token limit" in shown
    assert "cut at" not in answer_md(Answer("Whole.", done=True))


def test_a_whole_document_answer_cites_only_its_pages_and_names_its_source() -> None:
    text = "- Filters are cleaned monthly [p. 3]\n- Fans [p. 51]\n- Power [p. 2–9]\n- Cards [p. 8]"
    final = grounded(Answer(text, done=True), "manual.pdf", 8)
    assert "[p. 51]" not in final.text and "[p. 2–9]" not in final.text
    assert "[p. 3]" in final.text and "[p. 8]" in final.text
    assert final.footer == "Source: manual.pdf — pages 3, 8 cited, all 8 pages read"
    assert "Source: manual.pdf" in answer_md(final)
    assert grounded(Answer("so far [p. 51", done=False), "manual.pdf", 8).footer == ""


def test_load_progress_never_shows_more_loaded_than_its_total() -> None:
    from app.telemetry.load_progress import load_row
    from app.telemetry.views import LoadRow
    from app.ui.admin_page import _log_frame, _progress, _size

    row = load_row(1, "127.0.0.1:1", gained=int(1.05 * 2**30), expected=int(0.02 * 2**30))
    assert row.loaded_bytes is not None and row.expected_bytes is not None and row.pct is not None
    assert row.loaded_bytes <= row.expected_bytes and row.pct < 100
    assert (_size(row.loaded_bytes), _size(int(0.02 * 2**30))) == ("1.05 GiB", "20 MiB")
    # the running action by its name on every tick, not only in the click's answer (a tick replaced the
    # click's "⏳ engine restart…" before the page drew it); a card without a reading says so
    line = _progress(
        "engine restart", "loading Gemma 3 270M (demo) across 4 cards", [row, LoadRow(card=2, endpoint="e")]
    )
    assert line.splitlines() == [
        "⏳ engine restart: loading Gemma 3 270M (demo) across 4 cards",
        "- card 1 (127.0.0.1:1): 1.05 GiB of ≈1.05 GiB (99 %)",
        "- card 2 (e): no memory reading",
    ]
    log = _log_frame([{"at": "t", "who": "web", "action": "switch", "detail": "refused", "ok": 0}])
    assert log["Outcome"].tolist() == ["✗ refused or failed"] and "ok" not in log.columns


def test_an_empty_extraction_cell_is_flagged_and_a_stopped_run_that_read_nothing_says_so() -> None:
    from app.ui.extraction_review import _cell_flag, _flagged
    from app.ui.extraction_tab import _progress

    assert _cell_flag(None, None, None, False) == "missing"
    grid = _flagged(["document", "total"], [[("a.pdf", ""), ("", "missing")]])
    assert grid["data"][0][1] == "" and grid["metadata"]["display_value"][0][1] == "–"
    assert "--q-flag: '–'" in grid["metadata"]["styling"][0][1]
    run = Run(1, "invoice", {}, "Invoice", "stopped", "2026-01-01T00:00", None, "stopped by the user", 1, 0)
    assert _progress(run, "") == "**Invoice** — stopped by the user before any document"
