"""The documents feature's named endpoints (gradio_client): documents, ask, summarize, unlock, and
managing one document (delete_document, reindex_document). `ingest` is the Documents tab's drop zone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gradio as gr

from app.admin import AdminService
from app.errors import QuartetError
from app.knowledge.answer import Answerer, Source
from app.knowledge.service import KnowledgeService
from app.knowledge.summary import Summariser
from app.ui.callers import Owners, held
from app.ui.errors import explained
from app.ui.wiring import ENGINE_LISTENERS, ENGINE_QUEUE


def register(
    kb: KnowledgeService, answerer: Answerer, summariser: Summariser, admin: AdminService, owners: Owners
) -> None:
    def documents() -> list[dict[str, Any]]:
        """Every document in the knowledge base with its status, pages, chunks, any error, and any note
        (pages without text; "Indexed in part: …" for a document longer than the limits), and when it was
        last indexed."""
        return [
            {
                "id": d.id,
                "name": d.name,
                "collection": d.collection,
                "status": d.status,
                "pages": d.pages_total,
                "pages_done": d.pages_done,
                "chunks": d.chunk_count,
                "error_kind": d.error_kind,
                "error": d.error,
                "note": d.note,
                "indexed_at": d.indexed_at,
            }
            for d in kb.documents()
        ]

    @explained
    def ask(question: str, document_ids: list[int] | None = None) -> Iterator[tuple[str, list[dict[str, Any]]]]:
        """Stream a cited answer: yields (answer so far, sources with file and page)."""
        for update in answerer.ask(question, document_ids=document_ids or None):
            if update.error:
                raise QuartetError(update.error, kind=update.kind or "engine")
            yield update.text, [_source(s) for s in update.sources]

    @explained
    def summarize(document_id: int, question: str = "") -> Iterator[tuple[str, str]]:
        """Read a whole document (map-reduce): yields (answer so far, progress)."""
        for update in summariser.run(document_id, question=question):
            if update.error:
                raise QuartetError(update.error, kind=update.kind or "engine")
            yield update.text, update.progress

    @explained
    def unlock(document_id: int, password: str) -> str:
        """Index an encrypted PDF with its password (kept in memory for that indexing only)."""
        kb.unlock(document_id, password)
        return "queued"

    @explained
    @held(admin.check_holder)
    def delete_document(document_id: int, admin_token: str = "", request: gr.Request = None) -> bool:  # type: ignore[assignment]
        """Remove a document from the index (and its file, when it lives in the kb folder): one the caller
        uploaded, or, with the admin session's token, any."""
        if admin_token:
            admin.check(admin_token)
            return kb.delete(document_id, by=None)
        return kb.delete(document_id, by=owners.owner_of(request))

    @explained
    def reindex_document(document_id: int) -> str:
        """Index a document again from its file."""
        kb.reindex(document_id)
        return "queued"

    gr.api(documents, api_name="documents", queue=False)
    gr.api(unlock, api_name="unlock", queue=False)
    gr.api(delete_document, api_name="delete_document", queue=False)
    gr.api(reindex_document, api_name="reindex_document", queue=False)
    gr.api(ask, api_name="ask", concurrency_limit=ENGINE_LISTENERS, concurrency_id=ENGINE_QUEUE)
    gr.api(summarize, api_name="summarize", concurrency_limit=ENGINE_LISTENERS, concurrency_id=ENGINE_QUEUE)


def _source(source: Source) -> dict[str, Any]:
    return {
        "number": source.number,
        "document_id": source.document_id,
        "file": source.name,
        "page": source.page,
        "text": source.text,
        "score": source.score,
        "ocr": source.ocr is not None,  # the passage was read by OCR from a scanned page or an image
        "confidence": source.ocr,  # the OCR's confidence (0–1); None for a text layer
    }
