"""The Documents tab: drop files, watch them index, ask with cited answers, read a whole document."""

from __future__ import annotations

import html
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from app.context import AppContext
from app.knowledge.answer import Answer, Source
from app.ui.rendering import literal, safe_markdown
from app.ui.wiring import ENGINE_LISTENERS, ENGINE_QUEUE

_COLUMNS = ["id", "name", "collection", "status", "pages", "chunks", "problem"]
_EVERY_S = 2.0


def build(ctx: AppContext) -> gr.Timer:
    """Returns the tab's timer (the document list refreshes only while the tab is shown)."""
    kb = ctx.knowledge
    with gr.Row():
        drop = gr.File(label="Drop files here (PDF, TXT, MD, HTML, DOCX, CSV)", file_count="multiple",
                       elem_id="upload", scale=2)
        outcome = gr.JSON(label="Upload", elem_id="upload-status", scale=1)
    progress = gr.Markdown(elem_id="ingest-progress")
    table = gr.Dataframe(headers=_COLUMNS, interactive=False, wrap=True, elem_id="documents")
    with gr.Row():
        locked = gr.Dropdown(label="Encrypted PDF", choices=[], scale=2, elem_id="locked")
        secret = gr.Textbox(label="Its password", type="password", scale=2, elem_id="pdf-password")
        unlock = gr.Button("Open it", scale=1, elem_id="unlock")
    with gr.Row():
        question = gr.Textbox(label="Question", placeholder="Ask the documents…", scale=4, elem_id="question")
        scope = gr.Dropdown(label="Only these documents", multiselect=True, choices=[], scale=2, elem_id="scope")
        ask = gr.Button("Ask", variant="primary", scale=1, elem_id="ask")
    answer = gr.Markdown(elem_id="answer")
    with gr.Row():
        picked = gr.Radio(label="Sources", choices=[], elem_id="sources", scale=1)
        page = gr.HTML(elem_id="page-view")
    found = gr.State([])
    with gr.Accordion("Whole document", open=False):
        with gr.Row():
            whole = gr.Dropdown(label="Document", choices=[], elem_id="whole-doc", scale=2)
            whole_q = gr.Textbox(label="Question (empty: summarise)", scale=3, elem_id="whole-question")
            run = gr.Button("Read it all", scale=1, elem_id="summarise")
        summary = gr.Markdown(elem_id="summary")

    def listing() -> tuple[Any, ...]:
        docs = kb.documents()
        rows = [[d.id, d.name, d.collection, d.status, f"{d.pages_done}/{d.pages_total}", d.chunk_count,
                 d.error or d.note or ""] for d in docs]
        ready = [(d.name, d.id) for d in docs if d.status == "ok"]
        encrypted = [(d.name, d.id) for d in docs if d.error_kind == "encrypted"]
        return (pd.DataFrame(rows, columns=_COLUMNS), _progress_line(kb.progress()),
                gr.update(choices=ready), gr.update(choices=ready), gr.update(choices=encrypted))

    def on_unlock(doc_id: int | None, password: str) -> tuple[Any, ...]:
        if doc_id is None or not password:
            raise gr.Error("Choose the encrypted PDF and type its password.")
        kb.unlock(doc_id, password)  # the password stays in memory, for this indexing only
        return "", *listing()

    def on_upload(files: list[str] | None) -> tuple[Any, ...]:
        results = []
        for name in files or []:
            try:
                saved = kb.upload(Path(name).name, Path(name))  # Gradio took it only from its upload folder
                results.append({"file": Path(name).name, "saved_as": saved.name, "status": "queued"})
            except ValueError as err:
                results.append({"file": Path(name).name, "status": "refused", "reason": str(err)})
        return results, *listing()

    def on_ask(text: str, ids: list[int] | None) -> Iterator[tuple[Any, ...]]:
        try:
            updates = ctx.answerer.ask(text, document_ids=ids or None)
            for update in updates:
                yield _answer_md(update), gr.update(choices=_source_choices(update.sources)), update.sources
        except ValueError as err:
            raise gr.Error(str(err)) from err

    def on_pick(number: int | None, sources: list[Source]) -> str:
        chosen = next((s for s in sources if s.number == number), None)
        return _page_html(ctx, chosen) if chosen else ""

    def on_whole(doc_id: int | None, text: str) -> Iterator[str]:
        if doc_id is None:
            raise gr.Error("Choose a document first.")
        try:
            for update in ctx.summariser.run(doc_id, question=text):
                yield _answer_md(update)
        except ValueError as err:
            raise gr.Error(str(err)) from err

    engine_bound: dict[str, Any] = {"concurrency_limit": ENGINE_LISTENERS, "concurrency_id": ENGINE_QUEUE}
    lists = [table, progress, scope, whole, locked]
    drop.upload(on_upload, drop, [outcome, *lists], api_name="ingest")
    unlock.click(on_unlock, [locked, secret], [secret, *lists], api_visibility="private")
    gr.on([ask.click, question.submit], on_ask, [question, scope], [answer, picked, found],
          api_visibility="private", **engine_bound)
    picked.change(on_pick, [picked, found], page, queue=False, api_visibility="private")
    run.click(on_whole, [whole, whole_q], summary, api_visibility="private", **engine_bound)
    timer = gr.Timer(_EVERY_S, active=False)
    timer.tick(listing, None, lists, queue=False, api_visibility="private")
    return timer


def _progress_line(progress: Any) -> str:
    if progress.idle:
        return "All documents are indexed."
    now = " · ".join(f"indexing **{a.name}**: page {a.pages_done} of {a.pages_total}" for a in progress.running)
    return f"{now}{' · ' if now else ''}{progress.queued_count} waiting"


def _source_choices(sources: list[Source]) -> list[tuple[str, int]]:
    return [(f"[{s.number}] {s.name}, page {s.page}", s.number) for s in sources]


def _answer_md(update: Answer) -> str:
    text = safe_markdown(update.text)
    if update.waiting:
        text = f"⏳ waiting, position {update.waiting}\n\n" + text
    if update.progress and not update.done:
        text = f"_{update.progress}…_\n\n" + text
    if update.error:
        text += f"\n\n⚠ {update.error}"
    if update.done and update.sources:
        cited = update.cited() or update.sources
        text += "\n\n" + "  \n".join(f"\\[{s.number}\\] {literal(s.name)}, page {s.page}" for s in cited)
    return text


def _page_html(ctx: AppContext, source: Source) -> str:
    full = ctx.knowledge.page_text(source.document_id, source.page) or ""
    before, passage, after = full[: source.start], full[source.start : source.end], full[source.end :]
    if not passage.strip():  # offsets unknown: show the snippet itself highlighted
        before, passage, after = "", source.text, ""
    body = f"{html.escape(before)}<mark>{html.escape(passage)}</mark>{html.escape(after)}"
    return (f"<div class='q-page'><div class='q-page-title'>{html.escape(source.name)}, page {source.page}</div>"
            f"<div class='q-page-text'>{body}</div></div>")
