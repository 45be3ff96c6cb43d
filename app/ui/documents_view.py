"""What the Documents tab shows: the library table (status in colour, indexing by named phase), the report
of this page's uploads, the progress line, answers with their sources, a source's page."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from app.knowledge.answer import Answer, Source
from app.knowledge.ingest import FileProgress, IngestProgress
from app.knowledge.store import DocumentInfo
from app.ui.display import queue_line
from app.ui.rendering import literal, safe_markdown

# What a person reads first comes first (the note says why a file is not indexed); the short columns are as
# wide as their headers ("Passages" in a 9 % column broke as "Pas/sag/es") and scroll in view when needed.
COLUMNS = ["Document", "Status", "Note", "Pages", "Passages", "Folder"]
WIDTHS: list[str | int] = ["30%", "150px", "40%", "70px", "92px", "80px"]
STATUS = {
    "ok": "✅ indexed",
    "error": "⚠ not indexed",
    "duplicate": "⧉ duplicate",
    "indexing": "⏳ indexing",
    "queued": "⏳ queued",
}
# The status cell's colour, by meaning; the colours themselves are CSS variables (light and dark) in quartet.css.
_TONE = {"ok": "ok", "error": "bad", "duplicate": "warn", "indexing": "busy", "queued": "busy"}
# The phases of indexing one file, in order: a file's progress moves forward through them, never back.
PHASES = ("reading", "embedding", "saving")


def names(text: str) -> list[str]:
    """The file names the page's script sent, one a line."""
    return [line.strip() for line in (text or "").splitlines() if line.strip()][:50]


def table(docs: list[DocumentInfo], progress: IngestProgress) -> dict[str, Any]:
    """The library as the Dataframe's value: a file being indexed says its phase in its status (its page
    count stays its page count: the share embedded, in pages, read as "117 → 58 pages")."""
    running = {file.name: file for file in progress.running}
    rows, styles = [], []
    for d in docs:
        now = running.get(d.name) if d.status in ("indexing", "queued") else None
        status = _phase(now) if now else STATUS.get(d.status, d.status)
        pages = str(d.pages_total) if d.pages_total else ""
        rows.append([d.name, status, d.error or d.note or "", pages, d.chunk_count, d.collection or ""])
        tone = _TONE.get(d.status, "")
        styles.append(["", f"color: var(--q-tone-{tone}); font-weight: 600" if tone else "", "", "", "", ""])
    return {"headers": COLUMNS, "data": rows, "metadata": {"styling": styles} if rows else None}


def _phase(file: FileProgress) -> str:
    """'⏳ reading 40/117', '⏳ embedding 58/117', '⏳ saving': where one file's indexing stands."""
    if file.state == "ocr":
        return f"⏳ reading page {file.pages_done} of {file.pages_total} by OCR"
    if file.state in ("reading", "embedding") and file.pages_total:
        return f"⏳ {file.state} {file.pages_done}/{file.pages_total}"
    return f"⏳ {file.state}"


def uploads_md(sent: list[list[Any]], docs: list[DocumentInfo]) -> str:
    """Each file this page uploaded, with where it stands now (not only "queued")."""
    by_name = {d.name: d for d in docs}
    lines = []
    for file, saved, refused in sent:
        if refused:
            lines.append(f"- ⚠ {literal(file)}: refused — {literal(refused)}")
            continue
        doc = by_name.get(saved)
        state = STATUS.get(doc.status, doc.status) if doc else "⏳ queued"
        why = (doc.error or doc.note or "") if doc else ""
        detail = f" — {literal(why)}" if why else ""
        renamed = f" (saved as {literal(saved)})" if saved != file else ""
        lines.append(f"- {literal(file)}{renamed}: {state}{detail}")
    return "\n".join(lines)


def progress_line(progress: IngestProgress, docs: Sequence[DocumentInfo] = ()) -> str:
    """What indexing does now, phase by phase and each phase named with its step: 'step 1 of 3, reading
    **a.pdf**: page 40 of 117'; then embedding (counted in pages), then saving. Idle, it says how many
    documents are indexed and which could not be, and why (not "all indexed" over four broken files)."""
    if progress.idle:
        return _settled(docs)
    now = []
    for file in progress.running:
        step = f"step {PHASES.index(file.state) + 1} of {len(PHASES)}, " if file.state in PHASES else ""
        if file.state == "ocr":
            now.append(
                f"step 1 of {len(PHASES)}, reading **{literal(file.name)}**: page {file.pages_done} of "
                f"{file.pages_total} by OCR"
            )
        elif file.state == "reading":
            now.append(f"{step}reading **{literal(file.name)}**: page {file.pages_done} of {file.pages_total}")
        elif file.state == "embedding":
            now.append(f"{step}embedding **{literal(file.name)}**: {file.pages_done} of {file.pages_total} pages")
        else:
            now.append(f"{step}{file.state} **{literal(file.name)}**")
    waiting = f"{progress.queued_count} waiting" if progress.queued_count else ""
    return " · ".join(part for part in [*now, waiting] if part)


def fate_line(doc: DocumentInfo | None, progress: IngestProgress, doing: str) -> str:
    """Where a document an action of this page queued ("Index again", "Open it") stands now, said beside
    its button: '⏳ indexing a.pdf again: embedding 3/8', '✅ a.pdf is indexed: 8 pages, 12 passages',
    '⚠ a.pdf: wrong password'."""
    if doc is None:
        return ""
    name = f"**{literal(doc.name)}**"
    now = next((f for f in [*progress.running, *progress.queued] if f.path == doc.path), None)
    if now is not None:
        return f"{_phase(now)} — {doing} {name}"
    if doc.status == "ok":
        return f"✅ {name} is indexed: {doc.pages_total} pages, {doc.chunk_count} passages."
    if doc.status == "error":
        return f"⚠ {name} is not indexed: {literal(doc.error or 'no reason given')}"
    return f"{STATUS.get(doc.status, doc.status)} — {name}"


def _settled(docs: Sequence[DocumentInfo]) -> str:
    failed = [d for d in docs if d.status == "error"]
    indexed = sum(d.status == "ok" for d in docs)
    if not failed:
        return "All documents are indexed." if indexed else "No documents yet."
    reasons = "; ".join(f"**{literal(d.name)}** — {literal(d.error or 'no reason given')}" for d in failed[:4])
    more = f"; and {len(failed) - 4} more (see the Note column)" if len(failed) > 4 else ""
    return f"{indexed} indexed · ⚠ {len(failed)} could not be indexed: {reasons}{more}."


def _pages(sources: list[Source]) -> dict[tuple[int, int], list[Source]]:
    """Sources grouped by document and page: one line per page, however many passages it gave."""
    grouped: dict[tuple[int, int], list[Source]] = {}
    for source in sources:
        grouped.setdefault((source.document_id, source.page), []).append(source)
    return grouped


def page_label(source: Source) -> str:
    """'page 3', or 'page 3 (OCR, 91%)' for a page read by OCR."""
    if source.ocr is None:
        return f"page {source.page}"
    return f"page {source.page} (OCR, {source.ocr:.0%})"


def source_choices(sources: list[Source]) -> list[tuple[str, int]]:
    return [
        (f"[{same[0].number}] {same[0].name}, {page_label(same[0])}", same[0].number)
        for same in _pages(sources).values()
    ]


def answer_md(update: Answer, *, stopped: bool = False) -> str:
    """An answer (or a summary) so far: where it stands while it waits or reads, its sources once done;
    `stopped`: the asker pressed Stop (it is said under the text so far)."""
    text = safe_markdown(update.text)
    if stopped:
        return text + ("\n\n" if text else "") + "_stopped_"
    if update.waiting:  # someone is ahead: say so, and what comes when it is this answer's turn
        after = f" — next: {update.progress}" if update.progress else ""
        text = f"{queue_line(waiting=update.waiting)}{after}\n\n" + text
    elif update.progress and not update.done:
        text = f"_{update.progress}…_\n\n" + text
    elif update.reading:
        text = f"_{queue_line(waiting=0, reading=True)}_\n\n" + text
    if update.error:
        text += f"\n\n⚠ {update.error}"
    if update.done and update.cut:
        text += "\n\n_✂ cut at the token limit: the answer ends here, perhaps mid-sentence._"
    if update.done and update.footer:
        text += f"\n\n{literal(update.footer)}"
    if update.done and update.sources:
        cited = update.cited() or update.sources
        text += "\n\n" + "  \n".join(
            f"\\[{same[0].number}\\] {literal(same[0].name)}, {page_label(same[0])}" for same in _pages(cited).values()
        )
    return text


def page_html(source: Source, full: str) -> str:
    before, passage, after = full[: source.start], full[source.start : source.end], full[source.end :]
    if not passage.strip():  # offsets unknown: show the snippet itself highlighted
        before, passage, after = "", source.text, ""
    body = f"{html.escape(before)}<mark>{html.escape(passage)}</mark>{html.escape(after)}"
    return (
        f"<div class='q-page' data-source='{source.number}'>"
        f"<div class='q-page-title'>{html.escape(source.name)}, {html.escape(page_label(source))}</div>"
        f"<div class='q-page-text'>{body}</div></div>"
    )
