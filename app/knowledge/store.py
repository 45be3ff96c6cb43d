"""Documents, pages, chunks and vectors in SQLite; every change to a document is one transaction.

A crash leaves a document wholly old or wholly new: replacing its content deletes and inserts all
its rows (pages, chunks, full-text index, vectors, status) in a single transaction. The in-memory
vector index follows right after the commit, while it is still the writer's turn (`after_commit`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import sqlite_utils

from app.database import Database, now
from app.knowledge.chunking import Chunk
from app.knowledge.loaders import Page
from app.knowledge.migrations import MIGRATIONS
from app.knowledge.trigram_counts import TrigramCounts
from app.knowledge.vectors import Block, VectorIndex


@dataclass(frozen=True)
class DocumentInfo:
    id: int
    path: str
    name: str
    collection: str
    status: str  # queued | indexing | ok | error | duplicate
    error_kind: str | None
    error: str | None
    note: str | None
    pages_done: int
    pages_total: int
    chunk_count: int
    size: int | None
    mtime: float | None
    sha256: str | None
    model: str | None
    duplicate_of: int | None
    added_at: str | None
    indexed_at: str | None


@dataclass(frozen=True)
class StoredChunk:
    id: int
    document_id: int
    page: int
    ordinal: int
    start: int
    end: int
    tokens: int
    text: str
    ocr: float | None = None  # read by OCR: the page's confidence (0–1); None for a text layer


@dataclass(frozen=True)
class FileState:
    sha256: str
    size: int
    mtime: float


_DOC_FIELDS = [f.name for f in fields(DocumentInfo)]
_CHUNK_FIELDS = [f.name for f in fields(StoredChunk)]
_DELETE_VECTORS = "DELETE FROM vectors WHERE chunk_id IN (SELECT id FROM chunks WHERE document_id = ?)"


class KnowledgeStore:
    def __init__(self, database: Database, *, model: str) -> None:
        self._database = database
        self.model = model
        self.vectors = VectorIndex()
        self._counts = TrigramCounts()
        database.migrate(MIGRATIONS)

    # -- documents -------------------------------------------------------------------------------

    def document(self, document_id: int) -> DocumentInfo | None:
        return self._one("id = ?", [document_id])

    def by_path(self, path: str) -> DocumentInfo | None:
        return self._one("path = ?", [path])

    def documents(self, *, collection: str | None = None) -> list[DocumentInfo]:
        where, args = ("collection = ?", [collection]) if collection is not None else (None, [])
        with self._database.read() as db:
            rows = db.table("documents").rows_where(where, args, order_by="name, id")
            return [_document(row) for row in rows]

    def indexed_with_hash(self, sha256: str, *, other_than: int) -> DocumentInfo | None:
        return self._one("sha256 = ? AND status = 'ok' AND id != ?", [sha256, other_than])

    def document_ids(self, *, collection: str | None, ids: Sequence[int] | None) -> set[int]:
        where, args = ["status = 'ok'"], []
        if collection is not None:
            where.append("collection = ?")
            args.append(collection)
        with self._database.read() as db:
            found = {row["id"] for row in db.table("documents").rows_where(" AND ".join(where), args)}
        return found & set(ids) if ids is not None else found

    def add(self, path: str, *, name: str, collection: str) -> int:
        """The id of the document at `path`, creating a queued row for a new path."""
        with self._database.atomic() as db:
            found = self.by_path(path)
            if found:
                return found.id
            row = {"path": path, "name": name, "collection": collection, "status": "queued", "added_at": now()}
            return int(db.table("documents").insert(row).last_pk or 0)

    def mark(self, document_id: int, *, status: str, pages_done: int = 0, pages_total: int = 0) -> None:
        """Set a document's status and progress (old content, if any, stays searchable)."""
        with self._database.atomic() as db:
            changes = {"status": status, "pages_done": pages_done, "pages_total": pages_total}
            db.table("documents").update(document_id, changes)

    def touch(self, document_id: int, state: FileState) -> None:
        """Record a new size/mtime of a file whose content did not change."""
        with self._database.atomic() as db:
            db.table("documents").update(document_id, {"size": state.size, "mtime": state.mtime})

    def progress(self, document_id: int, *, pages_done: int, pages_total: int) -> None:
        with self._database.atomic() as db:
            db.table("documents").update(document_id, {"pages_done": pages_done, "pages_total": pages_total})

    def record_failure(
        self, document_id: int, state: FileState | None, *, status: str, kind: str | None, message: str | None,
        duplicate_of: int | None = None,
    ) -> None:  # fmt: skip
        """An error or a duplicate: the document keeps its row (for the UI) and loses its content."""
        with self._database.atomic() as db:
            _delete_content(db, document_id)
            changes: dict[str, Any] = {
                "status": status, "error_kind": kind, "error": message, "note": None, "chunk_count": 0,
                "pages_done": 0, "pages_total": 0, "duplicate_of": duplicate_of, "model": None, "indexed_at": now(),
            }  # fmt: skip
            if state:
                changes.update(sha256=state.sha256 or None, size=state.size, mtime=state.mtime)
            db.table("documents").update(document_id, changes)
            self._follow(document_id, None)

    def replace_content(
        self, document_id: int, state: FileState, *, pages: Sequence[Page], chunks: Sequence[Chunk],
        vectors: np.ndarray, note: str | None,
    ) -> None:  # fmt: skip
        """Swap a document's pages, chunks and vectors for new ones, all in one transaction."""
        if len(chunks) != len(vectors):
            raise ValueError(f"{len(chunks)} chunks but {len(vectors)} vectors")
        with self._database.atomic() as db:
            _delete_content(db, document_id)
            db.table("pages").insert_all(
                {"document_id": document_id, "number": p.number, "text": p.text, "ocr": p.ocr} for p in pages
            )
            ocr = {p.number: p.ocr for p in pages}
            first = int(db.execute("SELECT coalesce(max(id), 0) + 1 FROM chunks").fetchone()[0])
            ids = np.arange(first, first + len(chunks), dtype=np.int64)
            db.table("chunks").insert_all(
                {"id": int(i), "document_id": document_id, "page": c.page, "ordinal": c.ordinal, "start": c.start,
                 "end": c.end, "tokens": c.tokens, "text": c.text, "ocr": ocr.get(c.page)}
                for i, c in zip(ids, chunks, strict=True)
            )  # fmt: skip
            self._insert_vectors(db, ids, vectors)
            changes = {
                "status": "ok", "error_kind": None, "error": None, "note": note, "chunk_count": len(chunks),
                "pages_done": len(pages), "pages_total": len(pages), "model": self.model, "duplicate_of": None,
                "sha256": state.sha256, "size": state.size, "mtime": state.mtime, "indexed_at": now(),
            }  # fmt: skip
            db.table("documents").update(document_id, changes)
            self._follow(document_id, (ids, vectors))

    def replace_vectors(self, document_id: int, chunk_ids: np.ndarray, vectors: np.ndarray) -> None:
        """New vectors for existing chunks (the embedder changed), in one transaction."""
        with self._database.atomic() as db:
            db.execute(_DELETE_VECTORS, [document_id])
            self._insert_vectors(db, chunk_ids, vectors)
            db.table("documents").update(document_id, {"model": self.model})
            self._follow(document_id, (chunk_ids, vectors), chunks_changed=False)

    def delete(self, document_id: int) -> None:
        with self._database.atomic() as db:
            _delete_content(db, document_id)
            db.execute("UPDATE documents SET duplicate_of = NULL WHERE duplicate_of = ?", [document_id])
            db.execute("DELETE FROM uploaders WHERE path = (SELECT path FROM documents WHERE id = ?)", [document_id])
            db.execute("DELETE FROM documents WHERE id = ?", [document_id])
            self._follow(document_id, None)

    # -- reading ---------------------------------------------------------------------------------

    def page_text(self, document_id: int, number: int) -> str | None:
        with self._database.read() as db:
            row = db.execute(
                "SELECT text FROM pages WHERE document_id = ? AND number = ?", [document_id, number]
            ).fetchone()
        return row[0] if row else None

    def chunks(self, document_id: int) -> list[StoredChunk]:
        with self._database.read() as db:
            rows = db.table("chunks").rows_where("document_id = ?", [document_id], order_by="ordinal")
            return [StoredChunk(**{k: row[k] for k in _CHUNK_FIELDS}) for row in rows]

    def chunks_by_id(self, ids: Sequence[int]) -> dict[int, StoredChunk]:
        with self._database.read() as db:
            rows = db.execute(
                f"SELECT {', '.join(_CHUNK_FIELDS)} FROM chunks WHERE id IN (SELECT value FROM json_each(?))",
                [_json_ids(ids)],
            ).fetchall()
        return {row[0]: StoredChunk(*row) for row in rows}

    def known_files(self) -> dict[str, tuple[int | None, float | None]]:
        """Every document's path with the size and mtime it had when it was last looked at."""
        with self._database.read() as db:
            rows = db.execute("SELECT path, size, mtime FROM documents").fetchall()
        return {path: (size, mtime) for path, size, mtime in rows}

    def unfinished(self) -> list[DocumentInfo]:
        """Documents a stop or a crash interrupted (queued or being indexed)."""
        return [d for d in self.documents() if d.status in ("queued", "indexing")]

    def stale_documents(self) -> list[int]:
        """Indexed documents whose vectors were made by another embedder than the current one."""
        with self._database.read() as db:
            rows = db.execute("SELECT id FROM documents WHERE status = 'ok' AND model != ?", [self.model])
            return [row[0] for row in rows.fetchall()]

    def ensure_vectors(self) -> VectorIndex:
        """The vector index, loaded from the database on first use; after that it is read without the
        database (its own lock), beside the full-text side's query."""
        if not self.vectors.loaded:
            with self._database.atomic() as db:  # the writer's turn: no write changes vectors while they load
                if not self.vectors.loaded:
                    self.vectors.load(self._blocks(db))
        return self.vectors

    def trigram_counts(self, grams: Sequence[str]) -> dict[str, int]:
        """How many chunks hold each trigram (FTS5 reads whole posting lists to count: cached until
        the next write)."""
        known, missing, generation = self._counts.lookup(grams)
        if missing:
            with self._database.read() as db:
                rows = db.execute(
                    "SELECT term, doc FROM chunks_fts_vocab WHERE term IN (SELECT value FROM json_each(?))",
                    [json.dumps(missing, ensure_ascii=False)],
                ).fetchall()
            found = dict.fromkeys(missing, 0) | {term: int(doc) for term, doc in rows}
            self._counts.keep(found, generation)
            known |= found
        return {g: known[g] for g in grams}

    def query(self, sql: str, args: Sequence[Any]) -> list[tuple[Any, ...]]:
        """A read-only query on this thread's read connection (used by full-text search)."""
        with self._database.read() as db:
            return db.execute(sql, list(args)).fetchall()

    # -- helpers ---------------------------------------------------------------------------------

    def _follow(self, document_id: int, vectors: tuple[np.ndarray, np.ndarray] | None, *,
                chunks_changed: bool = True) -> None:  # fmt: skip
        """Once this transaction commits: the document's vectors in memory are replaced (or dropped),
        and the trigram counts forgotten when its chunks changed."""

        def then() -> None:
            if vectors is None:
                self.vectors.drop(document_id)
            else:
                self.vectors.put(document_id, *vectors)
            if chunks_changed:
                self._counts.forget()

        self._database.after_commit(then)

    def _one(self, where: str, args: list[Any]) -> DocumentInfo | None:
        with self._database.read() as db:
            rows = list(db.table("documents").rows_where(where, args, limit=1))
        return _document(rows[0]) if rows else None

    def _insert_vectors(self, db: sqlite_utils.Database, ids: np.ndarray, vectors: np.ndarray) -> None:
        rows = ((int(i), self.model, np.asarray(v, dtype="<f4").tobytes()) for i, v in zip(ids, vectors, strict=True))
        db.conn.executemany("INSERT INTO vectors (chunk_id, model, vector) VALUES (?, ?, ?)", rows)

    def _blocks(self, db: sqlite_utils.Database) -> Iterator[Block]:
        cursor = db.execute(
            "SELECT c.document_id, v.chunk_id, v.vector FROM vectors v JOIN chunks c ON c.id = v.chunk_id "
            "WHERE v.model = ? ORDER BY c.document_id, v.chunk_id",
            [self.model],
        )
        current: int | None = None
        ids: list[int] = []
        rows: list[np.ndarray] = []
        for document_id, chunk_id, blob in cursor:
            if document_id != current and ids:
                yield current, np.array(ids, dtype=np.int64), np.vstack(rows)  # type: ignore[misc]
                ids, rows = [], []
            current = document_id
            ids.append(chunk_id)
            rows.append(np.frombuffer(blob, dtype="<f4"))
        if ids:
            yield current, np.array(ids, dtype=np.int64), np.vstack(rows)  # type: ignore[misc]


def _delete_content(db: sqlite_utils.Database, document_id: int) -> None:
    for sql in (
        _DELETE_VECTORS,
        "DELETE FROM chunks WHERE document_id = ?",  # the trigger removes them from chunks_fts
        "DELETE FROM pages WHERE document_id = ?",
    ):
        db.execute(sql, [document_id])


def _document(row: dict[str, Any]) -> DocumentInfo:
    return DocumentInfo(**{name: row.get(name) for name in _DOC_FIELDS})  # type: ignore[arg-type]


def _json_ids(ids: Sequence[int] | set[int]) -> str:
    return "[" + ",".join(str(int(i)) for i in ids) + "]"
