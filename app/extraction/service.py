"""The extraction feature's front door: what the Extraction tab and the named endpoints call.

One document now (`extract_one`, or `extract_file`: upload, index and extract in one), or a run: a
template (or custom schema) over a selection of documents or a folder of kb/, one document after
another in the background, each result stored as it finishes; its results, corrections and exports."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.errors import NotFound, Refused
from app.extraction.corrections import Corrections
from app.extraction.exports import RunExport, run_export
from app.extraction.extractor import Extraction, ExtractionFailed, Extractor, Limits, Step
from app.extraction.json_schema import SchemaProblem, Template, check_schema, load_templates
from app.extraction.store import ExtractionStore, Result, Run
from app.knowledge.service import KnowledgeService
from app.knowledge.store import DocumentInfo

log = logging.getLogger(__name__)
_INDEX_POLL_S = 0.5


@dataclass(frozen=True)
class _Job:
    run_id: int
    documents: tuple[DocumentInfo, ...]
    schema: dict[str, Any]


class ExtractionService:
    def __init__(
        self,
        store: ExtractionStore,
        extractor: Extractor,
        knowledge: KnowledgeService,
        templates: Path,
        *,
        index_timeout_s: float = 600.0,
    ) -> None:
        self._store, self._extractor, self._knowledge = store, extractor, knowledge
        self._templates = templates
        self._index_timeout_s = index_timeout_s
        self._corrections = Corrections(store, self._pages)
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._live: dict[int, str] = {}  # run id → what it is doing now
        self._stopped: set[int] = set()
        self._closing = threading.Event()  # the app is stopping: the run at hand ends, writing nothing more
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        for run in self._store.runs():
            if run.status in ("queued", "running"):  # the app stopped during it
                self._store.finish_run(run.id, error="the appliance restarted during this run; start it again")
        self._thread = threading.Thread(target=self._work, name="extraction", daemon=True)
        self._thread.start()

    def closing(self) -> None:
        """The app is stopping: the run at hand ends where it is and writes nothing more (the next start
        marks it as cut short). Said before the engine stops, so a run waiting for it ends at once."""
        self._closing.set()

    def stop(self, timeout: float = 10.0) -> None:
        """End the worker after the part it is on (a run cut short is marked at the next start)."""
        self.closing()
        self._jobs.put(None)
        if self._thread is not None:
            self._thread.join(timeout)

    # -- what to extract, from what --------------------------------------------------------

    def templates(self) -> dict[str, Template]:
        return load_templates(self._templates)

    def schema_for(self, template: str | None, custom: str | None = None) -> tuple[str, dict[str, Any]]:
        """(name, checked schema) of a template, or of a pasted custom schema when one is given."""
        if custom and custom.strip():
            return "custom", check_schema(custom)
        found = self.templates().get(template or "")
        if found is None:
            raise SchemaProblem(f"there is no template {template!r}; choose one of {', '.join(self.templates())}")
        return found.name, found.schema

    def documents_for(self, ids: Sequence[int] = (), folder: str | None = None) -> list[DocumentInfo]:
        """The chosen documents, plus every document of a kb/ folder (collection); indexed ones only."""
        chosen = {d.id: d for d in self._knowledge.documents() if d.id in set(ids)}
        if folder:
            chosen |= {d.id: d for d in self._knowledge.documents(collection=folder)}
        ready = [d for d in chosen.values() if d.status == "ok"]
        if not ready:
            raise Refused("choose at least one indexed document (or a folder that holds some)")
        return sorted(ready, key=lambda d: d.name)

    def find_document(self, key: str | int) -> DocumentInfo:
        """A document by id, or by file name when the name is unique."""
        text = str(key).strip()
        if text.isdigit() and (doc := self._knowledge.document(int(text))) is not None:
            return doc
        named = [d for d in self._knowledge.documents() if d.name == text]
        if len(named) != 1:
            if not named:
                raise NotFound(f"no document {text!r}")
            raise Refused(f"{len(named)} documents are named {text!r}: give its id instead")
        return named[0]

    def documents(self) -> list[DocumentInfo]:
        """The indexed documents, the ones an extraction can read."""
        return [d for d in self._knowledge.documents() if d.status == "ok"]

    # -- one document, now -------------------------------------------------------------------

    def extract_one(
        self,
        document_id: int,
        schema: dict[str, Any],
        *,
        max_tokens: int = 0,
        timeout_s: float = 0,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> Iterator[Step | Extraction]:
        """One document's record, now: its progress as `Step`s, then the `Extraction`. `max_tokens` and
        `timeout_s` (0: the appliance's) may lower the limits, never raise them; ExtractionFailed says why
        nothing valid came back."""
        limits = self._extractor.limits
        lower = Limits(max_tokens or limits.max_tokens, timeout_s or limits.timeout_s)
        result = yield from self._extractor.run(document_id, schema, cancelled=cancelled, limits=lower)
        yield result

    def extract_file(
        self, path: Path, schema: dict[str, Any], *, max_tokens: int = 0, timeout_s: float = 0, owner: str = ""
    ) -> Iterator[Step | Extraction]:
        """Upload (by `owner`) and extract in one: the file is saved into kb/ like any upload (its size
        limit, a safe name), indexed, then extracted as `extract_one`. UploadError or ExtractionFailed
        says why not."""
        saved = self._knowledge.upload(path.name, path, owner=owner)
        doc = yield from self._indexed(saved)
        yield from self.extract_one(doc.id, schema, max_tokens=max_tokens, timeout_s=timeout_s)

    def _indexed(self, saved: Path) -> Generator[Step, None, DocumentInfo]:
        """The document of an upload once indexed (a duplicate: the one it duplicates), with progress."""
        deadline = time.monotonic() + self._index_timeout_s
        while time.monotonic() < deadline:
            doc = next((d for d in self._knowledge.documents() if d.path == str(saved)), None)
            if doc is not None and doc.status == "duplicate" and doc.duplicate_of is not None:
                doc = self._knowledge.document(doc.duplicate_of) or doc
            if doc is not None and doc.status == "ok":
                return doc
            if doc is not None and doc.status in ("error", "duplicate"):
                raise ExtractionFailed(f"{saved.name} could not be indexed: {doc.error or doc.status}")
            pages = f": page {doc.pages_done} of {doc.pages_total}" if doc and doc.pages_total else ""
            yield Step(f"indexing {saved.name}{pages}")
            time.sleep(_INDEX_POLL_S)
        raise ExtractionFailed(
            f"{saved.name} was not indexed within {self._index_timeout_s:g} s; it stays in the "
            "library: extract it by name once the Documents tab says it is indexed"
        )

    # -- runs and their results ------------------------------------------------------------

    def runs(self, limit: int = 100, *, owner: str) -> list[Run]:
        """`owner`'s runs, newest first."""
        return self._store.runs(limit, owner=owner)

    def run(self, run_id: int, *, owner: str) -> Run:
        """One of `owner`'s runs; someone else's is as absent as one that never was."""
        found = self._store.run(run_id)
        if found is None or found.owner != owner:
            raise NotFound(f"there is no extraction run {run_id}")
        return found

    def results(self, run_id: int, *, owner: str) -> list[Result]:
        """A run's results so far, in the order the documents were read."""
        return self._store.results(self.run(run_id, owner=owner).id)

    def export(self, run_id: int, *, owner: str) -> RunExport:
        """The run's CSV, JSON and one CSV per table (corrections applied, the originals kept in JSON)."""
        return run_export(self.run(run_id, owner=owner), self._store.results(run_id))

    def correct_cells(self, run_id: int, rows: Sequence[dict[str, str]], *, owner: str) -> int:
        """A reviewed table (the cells' text, one dict per result, in order): every cell whose text differs
        from what was shown becomes a correction. Returns how many; ValueError names the cell."""
        return self._corrections.cells(self.run(run_id, owner=owner), rows)

    def table_rows(self, run_id: int, field: str, *, owner: str) -> list[tuple[Result, int, dict[str, Any]]]:
        """Every row of one table over a run's results: (result, row index, row with corrections applied)."""
        return self._corrections.table_rows(self.run(run_id, owner=owner), field)

    def correct_table_cells(self, run_id: int, field: str, rows: Sequence[dict[str, str]], *, owner: str) -> int:
        """A reviewed table grid (the cells' text, in the order of `table_rows`): every changed cell is a
        correction of that document's table. Returns how many cells; ValueError names the cell."""
        return self._corrections.table_cells(self.run(run_id, owner=owner), field, rows)

    def _pages(self, document_id: int | None) -> dict[int, str]:
        """A document's page texts, {} when it is no longer indexed."""
        try:
            return self._extractor.pages(document_id)[1] if document_id is not None else {}
        except ExtractionFailed:
            return {}

    # -- runs in the background ------------------------------------------------------------

    def start_run(self, documents: Sequence[DocumentInfo], *, template: str, schema: dict[str, Any], owner: str) -> int:
        """Queue a run for `owner` (only they will see it); its id."""
        title = f"{template}: {len(documents)} document{'s' if len(documents) != 1 else ''}"
        run_id = self._store.create_run(
            template=template, schema=schema, title=title, documents_total=len(documents), owner=owner
        )
        with self._lock:
            self._live[run_id] = "waiting for the runs before it"
        self._jobs.put(_Job(run_id, tuple(documents), schema))
        return run_id

    def stop_run(self, run_id: int, *, owner: str) -> None:
        self.run(run_id, owner=owner)
        with self._lock:
            self._stopped.add(run_id)

    def live(self, run_id: int) -> str:
        with self._lock:
            return self._live.get(run_id, "")

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None and not self._closing.is_set():
            try:
                self._run(job)
            except Exception as err:  # keep the worker alive for the next run
                if self._closing.is_set():  # the database may be closing too; the next start marks the run
                    return
                log.exception("extraction run %s failed", job.run_id)
                self._store.finish_run(job.run_id, error=f"internal error: {err}")
            with self._lock:
                self._live.pop(job.run_id, None)

    def _run(self, job: _Job) -> None:
        self._store.start_run(job.run_id)
        stopped = lambda: job.run_id in self._stopped or self._closing.is_set()  # noqa: E731
        failed: list[str] = []  # "name: why" of each document whose result is an error (a timeout too)
        for done, doc in enumerate(job.documents):
            if stopped():
                break
            try:
                for update in self.extract_one(doc.id, job.schema, cancelled=stopped):
                    if isinstance(update, Extraction):
                        problems = "; ".join(update.problems) or None
                        error = f"some parts failed: {problems}" if problems else None
                        self._store.save_result(job.run_id, doc.name, update.fields, document_id=doc.id, error=error)
                        failed += [f"{doc.name}: {error}"] if error else []
                        continue
                    waiting = f" (waiting, position {update.waiting})" if update.waiting else ""
                    with self._lock:
                        self._live[job.run_id] = f"document {done + 1} of {len(job.documents)} — {update.text}{waiting}"
            except ExtractionFailed as err:
                if self._closing.is_set() or (err.kind == "cancelled" and stopped()):  # not a document done
                    break
                self._store.save_result(job.run_id, doc.name, {}, document_id=doc.id, error=str(err))
                failed.append(f"{doc.name}: {err}")
            self._store.progress(job.run_id, done + 1)
        if self._closing.is_set():
            return  # left "running": the next start marks it as cut short by the restart
        if stopped():
            self._store.finish_run(job.run_id, error="stopped by the user", stopped=True)
        elif failed:  # listed as an error, as its export says of those documents (not "done")
            self._store.finish_run(job.run_id, error=f"{len(failed)} of {len(job.documents)} failed — {failed[0]}")
        else:
            self._store.finish_run(job.run_id)
