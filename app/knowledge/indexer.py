"""Indexing one file: hash, load, chunk, embed, store — idempotent by content hash.

An unchanged file (same SHA-256, same embedder) is skipped; a file whose content is already indexed
under another path is recorded as a duplicate of it (indexed once); a vanished file is removed.
Everything the indexer learns about a file ends in one transaction of the store.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import numpy as np

from app.knowledge.chunking import Chunk, chunk_pages
from app.knowledge.embedder import Embedder
from app.knowledge.loaders import LoadedDocument, LoadError, Reader, ScanTooLong, load, size_problem
from app.knowledge.options import KnowledgeOptions
from app.knowledge.store import DocumentInfo, FileState, KnowledgeStore
from app.knowledge.uploads import UploadError, is_regular_file, open_regular, shown_name

log = logging.getLogger(__name__)
Report = Callable[[str, int, int], None]  # (phase, pages done, pages in the document)
Outcome = Literal["indexed", "unchanged", "duplicate", "error", "removed", "reembedded", "moved"]
_SAVE_PROGRESS_EVERY_S = 0.5


class Cancelled(Exception):
    """The service is stopping; the document stays queued and is indexed again at the next start."""


@dataclass(frozen=True)
class Job:
    kind: Literal["index", "reembed"]
    path: Path | None = None
    document_id: int | None = None
    collection: str = "default"
    force: bool = False
    password: str | None = field(default=None, repr=False)
    large: bool = False  # indexed in the lane of large files, whatever the size of its file

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.path if self.path is not None else self.document_id}"

    @property
    def name(self) -> str:
        return self.path.name if self.path is not None else f"document {self.document_id}"


@dataclass(frozen=True)
class Result:
    outcome: Outcome
    message: str | None = None
    follow_up: list[Job] = field(default_factory=list)


class Indexer:
    def __init__(self, store: KnowledgeStore, embedder: Embedder, options: KnowledgeOptions) -> None:
        self.store = store
        self.embedder = embedder
        self.options = options
        self._readers: dict[int, Reader] = {}  # a reader process per indexing thread, kept between files
        self._readers_lock = threading.Lock()

    def close(self) -> None:
        """End the reader processes (the next file starts one again)."""
        with self._readers_lock:
            readers, self._readers = list(self._readers.values()), {}
        for reader in readers:
            reader.close()

    def _reader(self) -> Reader:
        with self._readers_lock:
            return self._readers.setdefault(threading.get_ident(), Reader())

    def run(self, job: Job, *, report: Report, cancelled: Callable[[], bool], small_lane: bool = False) -> Result:
        """Index `job`. In the lane of small files, a document found to have more than
        `small_lane_chunks` passages (a compressed PDF, a .docx) is handed on to the other lane."""
        if job.kind == "reembed":
            assert job.document_id is not None
            return self._reembed(job.document_id, report=report, cancelled=cancelled)
        assert job.path is not None
        try:
            return self._index(job, report=report, cancelled=cancelled, small_lane=small_lane)
        except Cancelled:
            raise
        except Exception as err:  # recorded for the user; the queue carries on with the next file
            log.exception("indexing %s failed", job.path)
            message = (
                f"Indexing {job.path.name} failed unexpectedly ({type(err).__name__}: {err}); re-index it to retry."
            )
            doc = self.store.by_path(str(job.path))
            if doc is not None:
                self.store.record_failure(doc.id, None, status="error", kind="internal", message=message)
            return Result("error", message)

    def _index(self, job: Job, *, report: Report, cancelled: Callable[[], bool], small_lane: bool) -> Result:
        path = job.path
        assert path is not None
        if not is_regular_file(path):  # gone, or a symlink, device or FIFO: never read through it
            return self._remove(str(path))
        doc_id = self.store.add(str(path), name=shown_name(path.name), collection=job.collection)
        existing = self.store.document(doc_id)
        try:
            state = _file_state(path, max_bytes=self.options.max_file_bytes)
        except LoadError as err:
            self.store.record_failure(doc_id, _stat_state(path), status="error", kind=err.kind, message=err.message)
            return Result("error", err.message)
        except OSError as err:
            return self._unreadable(doc_id, path, err)
        if existing and not job.force and _unchanged(existing, state, model=self.store.model):
            self.store.touch(doc_id, state)
            return Result("unchanged")
        same = self.store.indexed_with_hash(state.sha256, other_than=doc_id)
        if same is not None:
            message = f"{path.name} has the same content as {same.name}, which is indexed; it is kept once."
            self.store.record_failure(
                doc_id, state, status="duplicate", kind=None, message=message, duplicate_of=same.id
            )
            return Result("duplicate", message)
        result = self._load_and_store(job, doc_id, state, report=report, cancelled=cancelled, small_lane=small_lane)
        if existing and existing.sha256 != state.sha256 and result.outcome != "moved":
            result.follow_up.extend(self._copies_of(doc_id))
        return result

    def _load_and_store(
        self, job: Job, doc_id: int, state: FileState, *, report: Report, cancelled: Callable[[], bool],
        small_lane: bool,
    ) -> Result:  # fmt: skip
        path = job.path
        assert path is not None
        self.store.mark(doc_id, status="indexing")
        saver = _ProgressSaver(self.store, doc_id, report)
        limits = self.options.read_limits
        if small_lane:  # a long scan would hold up the small files behind it
            limits = replace(limits, ocr_max_pages=self.options.small_lane_ocr_pages)
        try:
            loaded = load(
                path, max_bytes=self.options.max_file_bytes, password=job.password, limits=limits,
                on_page=lambda done, total: saver("reading", done, max(done, total)),
                on_ocr=lambda page, total: saver("ocr", page, max(page, total)), reader=self._reader(),
            )  # fmt: skip
        except ScanTooLong:
            return Result("moved", follow_up=[replace(job, large=True)])
        except LoadError as err:
            self.store.record_failure(doc_id, state, status="error", kind=err.kind, message=err.message)
            return Result("error", err.message)
        except OSError as err:
            return self._unreadable(doc_id, path, err)
        loaded, chunks = self._chunks(loaded)
        if small_lane and len(chunks) > self.options.small_lane_chunks:
            return Result("moved", follow_up=[replace(job, large=True)])
        total = len(loaded.pages)
        vectors = self._embed([c.text for c in chunks], [c.tokens for c in chunks], total, saver, cancelled)
        report("saving", total, total)
        self.store.replace_content(doc_id, state, pages=loaded.pages, chunks=chunks, vectors=vectors, note=loaded.note)
        return Result("indexed", loaded.note)

    def _chunks(self, loaded: LoadedDocument) -> tuple[LoadedDocument, list[Chunk]]:
        """The document's chunks, at most `max_chunks` of them: the pages after the last one kept are
        left out (and the document says so)."""
        options = self.options
        chunks = chunk_pages(
            loaded.pages, self.embedder, target_tokens=options.chunk_tokens, overlap_tokens=options.chunk_overlap
        )
        if len(chunks) <= options.max_chunks:
            return loaded, chunks
        last = chunks[options.max_chunks - 1].page
        kept = [c for c in chunks if c.page < last] if last > loaded.pages[0].number else chunks[: options.max_chunks]
        more = " or more" if loaded.partial else ""
        why = (
            f"Indexed in part: only pages up to {kept[-1].page} ({len(kept)} of its {len(chunks)}{more} passages) were "
            f"indexed (the limit is {options.max_chunks} passages per document); the rest is left out. Split the "
            "document to index all of it."
        )
        return loaded.cut(kept[-1].page, why), kept

    def _unreadable(self, doc_id: int, path: Path, err: OSError) -> Result:
        message = f"{path.name} could not be read ({err.strerror or err}). Check that the file is readable."
        self.store.record_failure(doc_id, None, status="error", kind="unreadable", message=message)
        return Result("error", message)

    def _embed(
        self, texts: list[str], tokens: list[int], total: int, saver: _ProgressSaver, cancelled: Callable[[], bool]
    ) -> np.ndarray:
        """Vectors for `texts`, embedded shortest first so a batch wastes little padding (as
        sentence-transformers does); progress is the share of chunks embedded, counted in pages."""
        order = sorted(range(len(texts)), key=lambda i: tokens[i])
        rows: list[np.ndarray | None] = [None] * len(texts)
        step = self.options.embed_batch
        for at in range(0, len(order), step):
            if cancelled():
                raise Cancelled
            saver("embedding", total * at // len(order), total)
            batch = order[at : at + step]
            for i, vector in zip(batch, self.embedder.embed([texts[i] for i in batch], background=True), strict=True):
                rows[i] = vector
        saver("embedding", total, total)
        return np.vstack(rows) if rows else np.zeros((0, 1), dtype=np.float32)  # type: ignore[arg-type]

    def _reembed(self, document_id: int, *, report: Report, cancelled: Callable[[], bool]) -> Result:
        doc = self.store.document(document_id)
        if doc is None or doc.status != "ok":
            return Result("unchanged")
        chunks = self.store.chunks(document_id)
        saver = _ProgressSaver(self.store, document_id, report)
        vectors = self._embed([c.text for c in chunks], [c.tokens for c in chunks], doc.pages_total, saver, cancelled)
        ids = np.array([c.id for c in chunks], dtype=np.int64)
        self.store.replace_vectors(document_id, ids, vectors)
        return Result("reembedded")

    def _remove(self, key: str) -> Result:
        doc = self.store.by_path(key)
        if doc is None:
            return Result("unchanged")
        copies = self._copies_of(doc.id)
        self.store.delete(doc.id)
        return Result("removed", follow_up=copies)

    def _copies_of(self, document_id: int) -> list[Job]:
        """Jobs that index again the documents recorded as duplicates of `document_id`."""
        copies = [d for d in self.store.documents() if d.duplicate_of == document_id]
        return [Job("index", Path(d.path), collection=d.collection, force=True) for d in copies]


class _ProgressSaver:
    """Reports progress to the queue at once, and to the database at most twice a second."""

    def __init__(self, store: KnowledgeStore, document_id: int, report: Report) -> None:
        self.store = store
        self.document_id = document_id
        self.report = report
        self.saved_at = 0.0

    def __call__(self, phase: str, done: int, total: int) -> None:
        self.report(phase, done, total)
        if time.monotonic() - self.saved_at >= _SAVE_PROGRESS_EVERY_S or done == total:
            self.store.progress(self.document_id, pages_done=done, pages_total=total)
            self.saved_at = time.monotonic()


def _file_state(path: Path, *, max_bytes: int) -> FileState:
    stat = path.stat()
    if too_large := size_problem(path.name, stat.st_size, max_bytes):
        raise LoadError("too_large", too_large)
    digest = hashlib.sha256()
    try:
        opened = open_regular(path)
    except UploadError as err:
        raise LoadError("unsupported", str(err)) from err
    with opened as f:
        if os.fstat(f.fileno()).st_nlink > 1:  # kb/x.txt made a hard link to /etc/passwd, say
            raise LoadError(
                "unsupported",
                f"{shown_name(path.name)} is a hard link (the same file has another name, maybe outside the "
                "kb folder): it is not indexed. Copy the file into the folder instead.",
            )
        while block := f.read(1 << 20):
            digest.update(block)
    return FileState(digest.hexdigest(), stat.st_size, stat.st_mtime)


def _unchanged(existing: DocumentInfo, state: FileState, *, model: str) -> bool:
    """Same content, and either indexed with the current embedder or failed (it would fail again)."""
    if existing.sha256 != state.sha256:
        return False
    return existing.status == "error" or (existing.status == "ok" and existing.model == model)


def _stat_state(path: Path) -> FileState | None:
    """Size and mtime without the hash (for files too large to read)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return FileState("", stat.st_size, stat.st_mtime)


def reembed_jobs(document_ids: Sequence[int]) -> list[Job]:
    return [Job("reembed", document_id=d) for d in document_ids]
