"""The Documents tab: ask with cited answers (and Stop), read a whole document, drop files and see each
one's fate, manage the library (re-index, delete, clear the failed ones). Handlers call the knowledge
service, the answerer and the summariser only."""

from __future__ import annotations

import html
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from app.errors import Refused
from app.knowledge.answer import Answer, Answerer, Source
from app.knowledge.ingest import IngestProgress
from app.knowledge.service import KnowledgeService
from app.knowledge.store import DocumentInfo
from app.knowledge.summary import Summariser
from app.ui.display import queue_line
from app.ui.errors import explained
from app.ui.rendering import literal, safe_markdown
from app.ui.wiring import ENGINE_LISTENERS, ENGINE_QUEUE

# What a person reads first comes first (the note says why a file is not indexed); the short columns are as
# wide as their headers ("Passages" in a 9 % column broke as "Pas/sag/es") and scroll in view when needed.
_COLUMNS = ["Document", "Status", "Note", "Pages", "Passages", "Folder"]
_WIDTHS: list[str | int] = ["30%", "118px", "40%", "70px", "92px", "80px"]
_EVERY_S = 2.0
_STATUS = {
    "ok": "✅ indexed",
    "error": "⚠ not indexed",
    "duplicate": "⧉ duplicate",
    "indexing": "⏳ indexing",
    "queued": "⏳ queued",
}


def build(kb: KnowledgeService, answerer: Answerer, summariser: Summariser, *, max_upload_bytes: int) -> gr.Timer:
    """Returns the tab's timer (the library refreshes only while the tab is shown). `max_upload_bytes` is
    the page's upload limit: a larger file in a drop is refused by name, the others go on (assets/quartet.js)."""
    uploads = gr.State([])  # this page's uploads: (file name, name saved as or None, reason refused)
    found = gr.State([])
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=340):
            with gr.Row():
                question = gr.Textbox(label="Question", placeholder="Ask the documents…", scale=4, elem_id="question")
                ask = gr.Button("Ask", variant="primary", scale=1, min_width=80, elem_id="ask")
                stop_ask = gr.Button("Stop", variant="stop", scale=1, min_width=80, elem_id="stop-ask")
            scope = gr.Dropdown(label="Only these documents", multiselect=True, choices=[], elem_id="scope")
            answer = gr.Markdown(elem_id="answer")
            picked = gr.Radio(label="Sources", choices=[], elem_id="sources")
            page = gr.HTML(elem_id="page-view")
            with gr.Accordion("Whole document", open=False):
                whole = gr.Dropdown(label="Document", choices=[], elem_id="whole-doc")
                whole_q = gr.Textbox(label="Question (empty: summarise)", elem_id="whole-question")
                with gr.Row():
                    run = gr.Button("Read it all", elem_id="summarise")
                    stop_run = gr.Button("Stop", variant="stop", elem_id="stop-summarise")
                summary = gr.Markdown(elem_id="summary")
        with gr.Column(scale=2, min_width=320):
            drop = gr.File(
                label="Drop files here (PDF, TXT, MD, HTML, DOCX, CSV)", file_count="multiple", elem_id="upload"
            )
            gr.HTML(
                f"<div class='q-note' data-max-bytes='{max_upload_bytes}'>Up to {max_upload_bytes / 2**20:.0f} MB "
                "a file.</div>",
                elem_id="upload-limit",
            )
            # the page's script names here the files it kept out of a drop for their size (no upload at all
            # would happen otherwise: the browser refuses a whole batch for one file over the limit)
            too_large = gr.Textbox(elem_id="upload-too-large", elem_classes=["q-hidden"], show_label=False)
            outcome = gr.Markdown(elem_id="upload-status")
            report = gr.JSON(visible=False)  # what the `ingest` endpoint returns: one entry per file
            progress = gr.Markdown(elem_id="ingest-progress")
            table = gr.Dataframe(
                headers=_COLUMNS,
                interactive=False,
                wrap=True,
                column_widths=_WIDTHS,
                max_height=420,
                elem_id="documents",
            )
            with gr.Accordion("Manage a document", open=False, elem_id="manage-docs"):
                chosen = gr.Dropdown(label="Document", choices=[], elem_id="doc-choice")
                with gr.Row():
                    reindex = gr.Button("Index again", elem_id="reindex-doc")
                    delete = gr.Button("Delete…", elem_id="delete-doc")
                    really = gr.Button(
                        "Delete it for good", variant="stop", visible=False, elem_id="delete-doc-confirm"
                    )
                clear = gr.Button("Remove every failed or duplicate document", elem_id="clear-failed")
            with gr.Row():
                locked = gr.Dropdown(label="Password-protected PDF", choices=[], scale=2, elem_id="locked")
                secret = gr.Textbox(label="Its password", type="password", scale=2, elem_id="pdf-password")
                unlock = gr.Button("Open it", scale=1, elem_id="unlock")

    def listing(sent: list[list[Any]]) -> tuple[Any, ...]:
        docs = kb.documents()
        ready = [(d.name, d.id) for d in docs if d.status == "ok"]
        return (
            _table(docs),
            _progress_line(kb.progress()),
            _uploads_md(sent, docs),
            gr.update(choices=ready),
            gr.update(choices=ready),
            gr.update(choices=[(d.name, d.id) for d in docs if d.error_kind == "encrypted"]),
            gr.update(choices=[(d.name, d.id) for d in docs]),
        )

    def on_upload(files: list[str] | None, sent: list[list[Any]]) -> tuple[Any, ...]:
        # each file gets its line, whatever became of the others; Gradio took them only from its upload folder
        now = [[u.file, u.saved_as, u.reason] for u in kb.upload_all([Path(name) for name in files or []])]
        results = [
            {"file": f, "saved_as": saved, "status": "queued"}
            if saved
            else {"file": f, "status": "refused", "reason": why}
            for f, saved, why in now
        ]
        sent = now + sent[:20]
        return results, sent, *listing(sent)

    def on_too_large(names: str, sent: list[list[Any]]) -> tuple[Any, ...]:
        if not _names(names):  # the box emptied again below
            return gr.skip(), gr.skip(), *[gr.skip() for _ in lists]
        limit = f"{max_upload_bytes / 2**20:.0f} MB"
        now = [
            [name, None, f"{name} is larger than {limit}, the limit for one file; it was not saved."]
            for name in _names(names)
        ]
        sent = now + sent[:20]
        return "", sent, *listing(sent)

    @explained
    def on_unlock(doc_id: int | None, password: str, sent: list[list[Any]]) -> tuple[Any, ...]:
        if doc_id is None or not password:
            raise Refused("Choose the password-protected PDF and type its password.")
        kb.unlock(doc_id, password)  # the password stays in memory, for this indexing only
        return "", *listing(sent)

    @explained
    def on_reindex(doc_id: int | None, sent: list[list[Any]]) -> tuple[Any, ...]:
        if doc_id is None:
            raise Refused("Choose a document first.")
        kb.reindex(doc_id)
        return listing(sent)

    @explained
    def on_delete(doc_id: int | None, sent: list[list[Any]]) -> tuple[Any, ...]:
        if doc_id is None:
            raise Refused("Choose a document first.")
        kb.delete(doc_id)
        return gr.update(visible=False), *listing(sent)

    def on_clear(sent: list[list[Any]]) -> tuple[Any, ...]:
        kb.remove_failed()
        return listing(sent)

    @explained
    def on_ask(text: str, ids: list[int] | None) -> Iterator[tuple[Any, ...]]:
        for update in answerer.ask(text, document_ids=ids or None):
            yield _answer_md(update), gr.update(choices=_source_choices(update.sources)), update.sources

    def on_pick(number: int | None, sources: list[Source]) -> str:
        source = next((s for s in sources if s.number == number), None)
        return _page_html(source, kb.page_text(source.document_id, source.page) or "") if source else ""

    @explained
    def on_whole(doc_id: int | None, text: str) -> Iterator[str]:
        if doc_id is None:
            raise Refused("Choose a document first.")
        for update in summariser.run(doc_id, question=text):
            yield _answer_md(update)

    quiet: dict[str, Any] = {"queue": False, "api_visibility": "private"}
    # A step that may refuse runs through the queue: Gradio 6 shows a refusal's text only for those
    # (a `queue=False` step's gr.Error becomes a bare red "Error" on its outputs).
    may_refuse: dict[str, Any] = {"concurrency_limit": None, "api_visibility": "private", "show_progress": "hidden"}
    engine_bound: dict[str, Any] = {
        "concurrency_limit": ENGINE_LISTENERS,
        "concurrency_id": ENGINE_QUEUE,
        "api_visibility": "private",
    }
    lists = [table, progress, outcome, scope, whole, locked, chosen]
    drop.upload(on_upload, [drop, uploads], [report, uploads, *lists], api_name="ingest")
    too_large.change(on_too_large, [too_large, uploads], [too_large, uploads, *lists], **may_refuse)
    unlock.click(on_unlock, [locked, secret, uploads], [secret, *lists], **may_refuse)
    asked = gr.on([ask.click, question.submit], on_ask, [question, scope], [answer, picked, found], **engine_bound)
    stop_ask.click(None, None, None, cancels=[asked], **quiet)  # the answer's ticket is cancelled as it closes
    picked.change(on_pick, [picked, found], page, **quiet)
    read = run.click(on_whole, [whole, whole_q], summary, **engine_bound)
    stop_run.click(None, None, None, cancels=[read], **quiet)
    reindex.click(on_reindex, [chosen, uploads], lists, **may_refuse)
    delete.click(lambda: gr.update(visible=True), None, really, **quiet)
    really.click(on_delete, [chosen, uploads], [really, *lists], **may_refuse)
    clear.click(on_clear, uploads, lists, **may_refuse)
    timer = gr.Timer(_EVERY_S, active=False)
    timer.tick(listing, uploads, lists, **quiet)
    return timer


def _names(text: str) -> list[str]:
    """The file names the page's script sent, one a line."""
    return [line.strip() for line in (text or "").splitlines() if line.strip()][:50]


def _table(docs: list[DocumentInfo]) -> pd.DataFrame:
    rows = [
        [
            d.name,
            _STATUS.get(d.status, d.status),
            d.error or d.note or "",
            f"{d.pages_done}/{d.pages_total}",
            d.chunk_count,
            d.collection or "",
        ]
        for d in docs
    ]
    return pd.DataFrame(rows, columns=_COLUMNS)


def _uploads_md(sent: list[list[Any]], docs: list[DocumentInfo]) -> str:
    """Each file this page uploaded, with where it stands now (not only "queued")."""
    by_name = {d.name: d for d in docs}
    lines = []
    for file, saved, refused in sent:
        if refused:
            lines.append(f"- ⚠ {literal(file)}: refused — {literal(refused)}")
            continue
        doc = by_name.get(saved)
        state = _STATUS.get(doc.status, doc.status) if doc else "⏳ queued"
        why = (doc.error or doc.note or "") if doc else ""
        detail = f" — {literal(why)}" if why else ""
        renamed = f" (saved as {literal(saved)})" if saved != file else ""
        lines.append(f"- {literal(file)}{renamed}: {state}{detail}")
    return "\n".join(lines)


def _progress_line(progress: IngestProgress) -> str:
    """What indexing does now, phase by phase: reading page N of M, embedding, saving."""
    if progress.idle:
        return "All documents are indexed."
    now = []
    for file in progress.running:
        if file.state == "reading":
            now.append(f"reading **{literal(file.name)}**: page {file.pages_done} of {file.pages_total}")
        elif file.state == "embedding":
            now.append(f"embedding **{literal(file.name)}**: {file.pages_done} of {file.pages_total} pages")
        else:
            now.append(f"{file.state} **{literal(file.name)}**")
    waiting = f"{progress.queued_count} waiting" if progress.queued_count else ""
    return " · ".join(part for part in [*now, waiting] if part)


def _pages(sources: list[Source]) -> dict[tuple[int, int], list[Source]]:
    """Sources grouped by document and page: one line per page, however many passages it gave."""
    grouped: dict[tuple[int, int], list[Source]] = {}
    for source in sources:
        grouped.setdefault((source.document_id, source.page), []).append(source)
    return grouped


def _source_choices(sources: list[Source]) -> list[tuple[str, int]]:
    return [
        (f"[{', '.join(str(s.number) for s in same)}] {same[0].name}, page {same[0].page}", same[0].number)
        for same in _pages(sources).values()
    ]


def _answer_md(update: Answer) -> str:
    text = safe_markdown(update.text)
    if update.waiting:  # someone is ahead: say so, and what comes when it is this answer's turn
        after = f" — next: {update.progress}" if update.progress else ""
        text = f"{queue_line(waiting=update.waiting)}{after}\n\n" + text
    elif update.progress and not update.done:
        text = f"_{update.progress}…_\n\n" + text
    elif update.reading:
        text = f"_{queue_line(waiting=0, reading=True)}_\n\n" + text
    if update.error:
        text += f"\n\n⚠ {update.error}"
    if update.done and update.sources:
        cited = update.cited() or update.sources
        text += "\n\n" + "  \n".join(
            f"\\[{', '.join(str(s.number) for s in same)}\\] {literal(same[0].name)}, page {same[0].page}"
            for same in _pages(cited).values()
        )
    return text


def _page_html(source: Source, full: str) -> str:
    before, passage, after = full[: source.start], full[source.start : source.end], full[source.end :]
    if not passage.strip():  # offsets unknown: show the snippet itself highlighted
        before, passage, after = "", source.text, ""
    body = f"{html.escape(before)}<mark>{html.escape(passage)}</mark>{html.escape(after)}"
    return (
        f"<div class='q-page' data-source='{source.number}'>"
        f"<div class='q-page-title'>{html.escape(source.name)}, page {source.page}</div>"
        f"<div class='q-page-text'>{body}</div></div>"
    )
