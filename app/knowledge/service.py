"""The knowledge base as one service: what the UI, the Q&A code and the API talk to.

It owns the store, the ingestion queue (a worker thread per size class) and the kb-folder watcher. Nothing runs
until `start()`; `stop()` ends the threads (a document being indexed resumes at the next start).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from app import heap
from app.database import Database
from app.errors import NotFound, QuartetError, Refused
from app.knowledge.embedder import Embedder
from app.knowledge.indexer import Indexer, Job, reembed_jobs
from app.knowledge.ingest import IngestProgress, IngestQueue, Lane
from app.knowledge.options import KnowledgeOptions
from app.knowledge.search import Hit, hybrid_search
from app.knowledge.store import DocumentInfo, KnowledgeStore, StoredChunk
from app.knowledge.uploaders import Uploaders
from app.knowledge.uploads import Uploaded, save_upload
from app.knowledge.watcher import KbWatcher, ignored

DEFAULT_COLLECTION = "default"


class KnowledgeService:
    def __init__(
        self, database: Database, embedder: Embedder, *, kb_dir: Path | None, options: KnowledgeOptions | None = None
    ) -> None:
        self.options = options or KnowledgeOptions()
        self.embedder = embedder
        self.kb_dir = kb_dir.resolve() if kb_dir is not None else None
        self.store = KnowledgeStore(database, model=embedder.name)
        self.uploaders = Uploaders(database)
        self._indexer = Indexer(self.store, embedder, self.options)
        # the heap glibc keeps after a burst of files goes back once the queue is idle (bench/app_memory.py)
        self._queue = IngestQueue(self._indexer.run, lane_of=self._lane, on_idle=heap.give_back)
        self._search_pool: ThreadPoolExecutor | None = None  # full-text side of a search, beside the vectors
        self._watcher: KbWatcher | None = None
        if self.kb_dir is not None and self.options.watch:
            self._watcher = KbWatcher(
                self.kb_dir,
                submit=self._submit_paths,
                known=self.store.known_files,
                settle_s=self.options.settle_s,
                rescan_s=self.options.rescan_s,
            )

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker; resume interrupted documents, re-embed for a new embedder, watch kb/."""
        if self.kb_dir is not None:
            self.kb_dir.mkdir(parents=True, exist_ok=True)
        self._queue.start()
        if self._search_pool is None:
            self._search_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="knowledge-search")
        resume = [Job("index", Path(d.path), collection=d.collection, force=True) for d in self.store.unfinished()]
        self._queue.submit(resume + reembed_jobs(self.store.stale_documents()))
        if self._watcher is not None:
            self._watcher.start()
        elif self.kb_dir is not None:
            self.rescan()

    def stop(self, timeout: float = 10.0) -> None:
        if self._watcher is not None:
            self._watcher.stop(timeout)
        self._queue.stop(timeout)
        self._indexer.close()
        pool, self._search_pool = self._search_pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """True once nothing is queued or being indexed (False if `timeout` passed first)."""
        return self._queue.wait_idle(timeout)

    # -- adding and removing ---------------------------------------------------------------------

    def ingest_paths(self, paths: Iterable[Path], *, collection: str | None = None) -> int:
        """Queue files (folders: the files in them) for indexing; the number of files queued."""
        files: list[Path] = []
        for path in paths:
            path = Path(os.path.abspath(path))  # not resolve(): a symlink stays a symlink, and is refused
            if path.is_dir() and not path.is_symlink():
                files.extend(p for p in sorted(path.rglob("*")) if p.is_file() and not ignored(p, path))
            else:
                files.append(path)
        self._queue.submit(Job("index", p, collection=collection or self._collection(p)) for p in files)
        return len(files)

    def upload(self, filename: str, data: bytes | Path, *, collection: str | None = None, owner: str = "") -> Path:
        """Save an upload into the kb folder (a sub-folder per collection) and queue it at once; `owner`
        (who uploads it) may delete it later."""
        if self.kb_dir is None:
            raise Refused("uploads need a kb folder: set kb_dir")
        folder = _folder_name(collection) if collection else None
        path = save_upload(
            self.kb_dir / folder if folder else self.kb_dir, filename, data, max_bytes=self.options.max_file_bytes
        )
        self.uploaders.note(str(path), owner)
        self.ingest_paths([path], collection=folder)
        return path

    def upload_all(self, files: Sequence[Path], *, collection: str | None = None, owner: str = "") -> list[Uploaded]:
        """Save each file of a batch (the browser's uploads) on its own and queue it: one refused or not
        saved costs only its own line, and every file of the batch gets one, in order."""
        done = []
        for path in files:
            try:
                done.append(Uploaded(path.name, self.upload(path.name, path, collection=collection, owner=owner).name))
            except QuartetError as err:  # too large, not a file: the person's to fix
                done.append(Uploaded(path.name, None, err.message))
            except OSError as err:  # the disk: nobody's fault, try again
                done.append(Uploaded(path.name, None, f"it could not be saved ({err.strerror or err}); try again"))
        return done

    def unlock(self, document_id: int, password: str) -> None:
        """Index a password-protected PDF with its password (kept in memory only)."""
        doc = self._require(document_id)
        self._queue.submit([Job("index", Path(doc.path), collection=doc.collection, force=True, password=password)])

    def reindex(self, document_id: int | None = None) -> None:
        """Index one document, or all of them, again from their files."""
        docs = [self._require(document_id)] if document_id is not None else self.store.documents()
        self._queue.submit(Job("index", Path(d.path), collection=d.collection, force=True) for d in docs)

    def rescan(self) -> None:
        """Compare the kb folder and every indexed file with the index (the watcher also does this)."""
        if self._watcher is not None:
            self._watcher.rescan()
            return
        known = [Path(p) for p in self.store.known_files()]
        self.ingest_paths(known + ([self.kb_dir] if self.kb_dir is not None else []))

    def delete(self, document_id: int, *, by: str | None) -> bool:
        """Remove a document from the index — and its file when it lives in the kb folder, since the
        folder is what the index mirrors (the watcher would add it again otherwise). `by` is who asks:
        only its uploader may; None is the admin (or the app itself), who may delete any."""
        doc = self.store.document(document_id)
        if doc is None:
            return False
        if by is not None and (not by or self.uploaders.owner(doc.path) != by):
            raise QuartetError(
                f"{doc.name} was not uploaded by you: only whoever uploaded it, or the admin, can delete it",
                kind="denied",
            )
        path = Path(doc.path)
        if self.kb_dir is not None and path.is_relative_to(self.kb_dir):
            path.unlink(missing_ok=True)
        self.store.delete(document_id)
        return True

    def remove_failed(self) -> int:
        """Remove every document that failed or is a duplicate — but not a password-protected PDF, which
        is waiting for its password. The number removed."""
        failed = [
            d for d in self.store.documents() if d.status in ("error", "duplicate") and d.error_kind != "encrypted"
        ]
        for doc in failed:
            self.delete(doc.id, by=None)
        return len(failed)

    # -- reading ---------------------------------------------------------------------------------

    def documents(self, *, collection: str | None = None) -> list[DocumentInfo]:
        return self.store.documents(collection=collection)

    def document(self, document_id: int) -> DocumentInfo | None:
        return self.store.document(document_id)

    def progress(self) -> IngestProgress:
        return self._queue.progress()

    def search(
        self, query: str, *, k: int = 5, document_ids: Sequence[int] | None = None, collection: str | None = None
    ) -> list[Hit]:
        return hybrid_search(
            self.store, self.embedder, query, k=k, document_ids=document_ids, collection=collection,
            pool=self._search_pool,
        )  # fmt: skip

    def page_text(self, document_id: int, page: int) -> str | None:
        return self.store.page_text(document_id, page)

    def ocr_pages(self, document_id: int) -> dict[int, float]:
        """The pages of a document that were read by OCR, with the OCR's confidence (0–1)."""
        sql = "SELECT number, ocr FROM pages WHERE document_id = ? AND ocr IS NOT NULL"
        rows = self.store.query(sql, [document_id])
        return {int(number): float(confidence) for number, confidence in rows}

    def document_chunks(self, document_id: int) -> list[StoredChunk]:
        """All chunks of a document in reading order (for whole-document summaries)."""
        return self.store.chunks(document_id)

    # -- helpers ---------------------------------------------------------------------------------

    def _submit_paths(self, paths: list[Path]) -> None:
        self._queue.submit(Job("index", p, collection=self._collection(p)) for p in paths)

    def _lane(self, job: Job) -> Lane:
        """Large files and re-embeddings (whole documents) queue apart from small files."""
        if job.path is None or job.large:
            return "large"
        try:
            size = job.path.stat().st_size
        except OSError:
            return "small"  # a vanished file: its removal is quick
        return "large" if size > self.options.large_file_mb * 2**20 else "small"

    def _collection(self, path: Path) -> str:
        """Files in a sub-folder of kb/ belong to the collection named after it."""
        if self.kb_dir is not None and path.is_relative_to(self.kb_dir):
            parts = path.relative_to(self.kb_dir).parts
            if len(parts) > 1:
                return parts[0]
        known = self.store.by_path(str(path))
        return known.collection if known else DEFAULT_COLLECTION

    def _require(self, document_id: int) -> DocumentInfo:
        doc = self.store.document(document_id)
        if doc is None:
            raise NotFound(f"no document {document_id} in the knowledge base")
        return doc


def _folder_name(collection: str) -> str:
    name = "".join(ch for ch in collection if ch.isalnum() or ch in " -_").strip()
    return name or DEFAULT_COLLECTION
