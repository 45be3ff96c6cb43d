"""The Documents tab: ask with cited answers (and Stop), read a whole document, drop files and see each
one's fate, manage the library (re-index, delete, clear the failed ones). Handlers call the knowledge
service, the answerer and the summariser only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gradio as gr

from app.errors import Refused
from app.knowledge.answer import Answerer, Source
from app.knowledge.service import KnowledgeService
from app.knowledge.summary import Summariser
from app.ui.callers import Owners, session_of
from app.ui.documents_view import (
    COLUMNS,
    WIDTHS,
    answer_md,
    fate_line,
    names,
    page_html,
    progress_line,
    source_choices,
    uploads_md,
)
from app.ui.documents_view import table as library_table
from app.ui.errors import explained
from app.ui.stops import Stops
from app.ui.wiring import ENGINE_BOUND, MAY_REFUSE, QUIET, OnLoad

_EVERY_S = 2.0


def build(
    kb: KnowledgeService, answerer: Answerer, summariser: Summariser, owners: Owners, *, max_upload_bytes: int
) -> tuple[gr.Timer, OnLoad]:
    """Returns the tab's timer (the library refreshes only while the tab is shown) and its refresh (the
    page runs it when the tab is shown, not a timer's tick later). `max_upload_bytes` is
    the page's upload limit: a larger file in a drop is refused by name, the others go on (assets/quartet.js)."""
    stops = Stops()  # the Stop buttons' marks, per page
    uploads = gr.State([])  # this page's uploads: (file name, name saved as or None, reason refused)
    # the files of this page's earlier drops: Gradio's File keeps them and sends them again with the next drop
    taken = gr.State([])
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
                headers=COLUMNS,
                interactive=False,
                wrap=True,
                column_widths=WIDTHS,
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
                managed = gr.Markdown(elem_id="manage-status")
                clear = gr.Button("Remove every failed or duplicate document", elem_id="clear-failed")
            with gr.Row():
                locked = gr.Dropdown(label="Password-protected PDF", choices=[], scale=2, elem_id="locked")
                secret = gr.Textbox(label="Its password", type="password", scale=2, elem_id="pdf-password")
                unlock = gr.Button("Open it", scale=1, elem_id="unlock")
            unlocked = gr.Markdown(elem_id="unlock-status")
    # the document this page last sent to "Index again" and to "Open it": their lines follow it
    watched = gr.State({"reindex": None, "unlock": None})

    def listing(sent: list[list[Any]]) -> tuple[Any, ...]:
        docs, now = kb.documents(), kb.progress()
        ready = [(d.name, d.id) for d in docs if d.status == "ok"]
        return (
            library_table(docs, now),
            progress_line(now, docs),
            uploads_md(sent, docs),
            gr.update(choices=ready),
            gr.update(choices=ready),
            gr.update(choices=[(d.name, d.id) for d in docs if d.error_kind == "encrypted"]),
            gr.update(choices=[(d.name, d.id) for d in docs]),
        )

    def on_upload(
        files: list[str] | None, sent: list[list[Any]], taken: list[str], request: gr.Request
    ) -> tuple[Any, ...]:
        # each file gets its line, whatever became of the others; Gradio took them only from its upload folder.
        # Only this drop's files: the earlier drops' ones, sent again, are not saved and queued a second time
        # (a drop of files all sent before is meant: they go again).
        fresh = list(dict.fromkeys(f for f in files or [] if f not in taken)) or list(dict.fromkeys(files or []))
        paths, owner = [Path(name) for name in fresh], owners.owner_of(request)
        now = [[u.file, u.saved_as, u.reason] for u in kb.upload_all(paths, owner=owner)]
        results = [
            {"file": f, "saved_as": saved, "status": "queued"}
            if saved
            else {"file": f, "status": "refused", "reason": why}
            for f, saved, why in now
        ]
        sent = now + sent[:20]
        return results, sent, [*taken, *fresh][-200:], *listing(sent)

    def on_too_large(too_many: str, sent: list[list[Any]]) -> tuple[Any, ...]:
        if not names(too_many):  # the box emptied again below
            return gr.skip(), gr.skip(), *[gr.skip() for _ in lists]
        limit = f"{max_upload_bytes / 2**20:.0f} MB"
        now = [
            [name, None, f"{name} is larger than {limit}, the limit for one file; it was not saved."]
            for name in names(too_many)
        ]
        sent = now + sent[:20]
        return "", sent, *listing(sent)

    def fates(watch: dict[str, int | None]) -> tuple[str, str]:
        now = kb.progress()
        doc = {key: kb.document(i) if i is not None else None for key, i in watch.items()}
        return fate_line(doc["reindex"], now, "indexing again"), fate_line(doc["unlock"], now, "opening")

    @explained
    def on_unlock(
        doc_id: int | None, password: str, sent: list[list[Any]], watch: dict[str, int | None]
    ) -> tuple[Any, ...]:
        if doc_id is None or not password:
            raise Refused("Choose the password-protected PDF and type its password.")
        kb.unlock(doc_id, password)  # the password stays in memory, for this indexing only; the field keeps
        watch = {**watch, "unlock": doc_id}  # it, and the line under the button says if it was wrong
        return watch, fates(watch)[1], *listing(sent)

    @explained
    def on_reindex(doc_id: int | None, sent: list[list[Any]], watch: dict[str, int | None]) -> tuple[Any, ...]:
        if doc_id is None:
            raise Refused("Choose a document first.")
        kb.reindex(doc_id)
        watch = {**watch, "reindex": doc_id}
        return watch, fates(watch)[0], *listing(sent)

    @explained
    def on_delete(doc_id: int | None, sent: list[list[Any]], request: gr.Request) -> tuple[Any, ...]:
        if doc_id is None:
            raise Refused("Choose a document first.")
        doc = kb.document(doc_id)
        kb.delete(doc_id, by=owners.owner_of(request))
        gr.Info(f"{doc.name if doc else 'The document'} was deleted, its file too.", title="Deleted")
        return gr.update(visible=False), *listing(sent)

    def on_clear(sent: list[list[Any]]) -> tuple[Any, ...]:
        removed = kb.remove_failed()
        gr.Info(f"{removed} failed or duplicate document{'s' if removed != 1 else ''} removed.", title="Removed")
        return listing(sent)

    @explained
    def on_ask(text: str, ids: list[int] | None, request: gr.Request) -> Iterator[tuple[Any, ...]]:
        stopped = stops.stopped(session_of(request), "ask")
        for update in answerer.ask(text, document_ids=ids or None, cancelled=stopped):
            shown = answer_md(update, stopped=update.done and stopped())
            yield shown, gr.update(choices=source_choices(update.sources)), update.sources

    def on_pick(number: int | None, sources: list[Source]) -> str:
        source = next((s for s in sources if s.number == number), None)
        return page_html(source, kb.page_text(source.document_id, source.page) or "") if source else ""

    @explained
    def on_whole(doc_id: int | None, text: str, request: gr.Request) -> Iterator[str]:
        if doc_id is None:
            raise Refused("Choose a document first.")
        stopped = stops.stopped(session_of(request), "read")
        for update in summariser.run(doc_id, question=text, cancelled=stopped):
            yield answer_md(update, stopped=update.done and stopped())

    quiet, may_refuse, engine_bound = QUIET, MAY_REFUSE, ENGINE_BOUND
    lists = [table, progress, outcome, scope, whole, locked, chosen]
    drop.upload(
        on_upload, [drop, uploads, taken], [report, uploads, taken, *lists], api_name="ingest", show_progress="hidden"
    )
    too_large.change(on_too_large, [too_large, uploads], [too_large, uploads, *lists], **may_refuse)
    unlock.click(on_unlock, [locked, secret, uploads, watched], [watched, unlocked, *lists], **may_refuse)
    # Stop marks the page's answer stopped; the answer, waiting in line or streaming, ends at the mark (app/ui/stops.py)
    asking = gr.on([ask.click, question.submit], stops.marker("clear", "ask"), None, None, **quiet)
    asking.then(on_ask, [question, scope], [answer, picked, found], **engine_bound)
    stop_ask.click(stops.marker("stop", "ask"), None, None, **quiet)
    picked.change(on_pick, [picked, found], page, **quiet)
    reading = run.click(stops.marker("clear", "read"), None, None, **quiet)
    reading.then(on_whole, [whole, whole_q], summary, **engine_bound)
    stop_run.click(stops.marker("stop", "read"), None, None, **quiet)
    reindex.click(on_reindex, [chosen, uploads, watched], [watched, managed, *lists], **may_refuse)
    delete.click(lambda: gr.update(visible=True), None, really, **quiet)
    really.click(on_delete, [chosen, uploads], [really, *lists], **may_refuse)
    clear.click(on_clear, uploads, lists, **may_refuse)
    timer = gr.Timer(_EVERY_S, active=False)
    timer.tick(listing, uploads, lists, **quiet)
    timer.tick(fates, watched, [managed, unlocked], **quiet)
    return timer, OnLoad(listing, [uploads], lists)
