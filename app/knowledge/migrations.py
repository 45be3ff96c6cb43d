"""The knowledge base's tables, as append-only sqlite-utils migrations (see `app/database.py`).

documents  one row per file path: content hash, size, mtime, status, error, progress, collection
pages      the text of every page, so the UI can show a page and highlight a hit on it
chunks     slices of pages (page, start, end) with their text; `chunks_fts` indexes them (trigram),
           `chunks_fts_vocab` counts the chunks holding each trigram
vectors    one float32 embedding per chunk, with the name of the model that made it
uploaders  who uploaded the file at a path (a login, a page session, an API client): only they, or the
           admin, may delete its document; a file put in kb/ by other means has no uploader

A page (and each chunk of it) read by OCR has `ocr`, the engine's confidence (0–1); NULL for a text layer.
"""

from __future__ import annotations

import sqlite_utils

MIGRATIONS = sqlite_utils.Migrations("knowledge")


@MIGRATIONS(name="001_knowledge")
def _m001_knowledge(db: sqlite_utils.Database) -> None:
    db.table("documents").create(
        {
            "id": int,
            "path": str,
            "name": str,
            "collection": str,
            "sha256": str,
            "size": int,
            "mtime": float,
            "status": str,  # queued | indexing | ok | error | duplicate
            "error_kind": str,  # a LoadError kind, or "unreadable" / "internal"
            "error": str,  # for people
            "note": str,  # e.g. pages without a text layer
            "pages_done": int,
            "pages_total": int,
            "chunk_count": int,
            "model": str,  # the embedder that made this document's vectors
            "duplicate_of": int,
            "added_at": str,
            "indexed_at": str,
        },
        pk="id",
        not_null={"path", "name", "collection", "status"},
        defaults={"pages_done": 0, "pages_total": 0, "chunk_count": 0},
    )
    db.table("documents").create_index(["path"], unique=True)
    db.table("documents").create_index(["sha256"])
    db.table("documents").create_index(["collection"])
    db.table("pages").create(
        {"document_id": int, "number": int, "text": str},
        pk=("document_id", "number"),
        foreign_keys=[("document_id", "documents", "id")],
    )
    db.table("chunks").create(
        {
            "id": int,
            "document_id": int,
            "page": int,
            "ordinal": int,
            "start": int,  # character offsets in the page's text
            "end": int,
            "tokens": int,
            "text": str,
        },
        pk="id",
        foreign_keys=[("document_id", "documents", "id")],
    )
    db.table("chunks").create_index(["document_id", "ordinal"])
    db.table("chunks").enable_fts(["text"], tokenize="trigram", create_triggers=True)
    # how many chunks hold each trigram: lets search skip terms too common to be worth scoring
    db.execute("CREATE VIRTUAL TABLE chunks_fts_vocab USING fts5vocab(chunks_fts, 'row')")
    db.table("vectors").create(
        {"chunk_id": int, "model": str, "vector": bytes},
        pk="chunk_id",
        foreign_keys=[("chunk_id", "chunks", "id")],
    )


@MIGRATIONS(name="002_ocr")
def _m002_ocr(db: sqlite_utils.Database) -> None:
    db.table("pages").add_column("ocr", float)
    db.table("chunks").add_column("ocr", float)


@MIGRATIONS(name="003_uploaders")
def _m003_uploaders(db: sqlite_utils.Database) -> None:
    db.table("uploaders").create({"path": str, "owner": str}, pk="path", not_null={"owner"})
