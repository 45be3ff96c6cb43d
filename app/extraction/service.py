"""Extraction runs: a template (or custom schema) over a selection of documents or a folder of kb/,
one document after another in the background, each result stored as it finishes."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.extraction.cells import cell_text, cell_value
from app.extraction.extractor import Extraction, ExtractionFailed, Extractor
from app.extraction.schemas import SchemaProblem, Template, check_schema, columns, is_table, load_templates
from app.extraction.store import ExtractionStore, Result
from app.knowledge.service import KnowledgeService
from app.knowledge.store import DocumentInfo

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Job:
    run_id: int
    documents: tuple[DocumentInfo, ...]
    schema: dict[str, Any]


class ExtractionService:
    def __init__(
        self, store: ExtractionStore, extractor: Extractor, knowledge: KnowledgeService, templates: Path
    ) -> None:
        self.store, self.extractor, self.knowledge = store, extractor, knowledge
        self._templates = templates
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._live: dict[int, str] = {}  # run id → what it is doing now
        self._stopped: set[int] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        for run in self.store.runs():
            if run.status in ("queued", "running"):  # the app stopped during it
                self.store.finish_run(run.id, error="the appliance restarted during this run; start it again")
        self._thread = threading.Thread(target=self._work, name="extraction", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._jobs.put(None)

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
        chosen = {d.id: d for d in self.knowledge.documents() if d.id in set(ids)}
        if folder:
            chosen |= {d.id: d for d in self.knowledge.documents(collection=folder)}
        ready = [d for d in chosen.values() if d.status == "ok"]
        if not ready:
            raise ValueError("choose at least one indexed document (or a folder that holds some)")
        return sorted(ready, key=lambda d: d.name)

    def find_document(self, key: str | int) -> DocumentInfo:
        """A document by id, or by file name when the name is unique."""
        text = str(key).strip()
        if text.isdigit() and (doc := self.knowledge.document(int(text))) is not None:
            return doc
        named = [d for d in self.knowledge.documents() if d.name == text]
        if len(named) != 1:
            raise ValueError(f"no document {text!r}" if not named else f"{len(named)} documents are named {text!r}")
        return named[0]

    # -- running ---------------------------------------------------------------------------

    def correct_cells(self, run_id: int, rows: Sequence[dict[str, str]]) -> int:
        """A reviewed table (the cells' text, one dict per result, in order): every cell whose text differs
        from what was shown becomes a correction. Returns how many; ValueError names the cell."""
        run = self.store.run(run_id)
        if run is None:
            raise LookupError(f"no extraction run {run_id}")
        changed = 0
        for result, row in zip(self.store.results(run_id), rows, strict=False):
            for name, spec in run.schema["properties"].items():
                if is_table(spec) or name not in row or row[name] == cell_text(result.final.get(name)):
                    continue
                try:
                    self.store.correct(result.id, name, cell_value(row[name], spec))
                except ValueError as err:
                    raise ValueError(f"{result.document_name}, {name}: {err}") from err
                changed += 1
        return changed

    def table_rows(self, run_id: int, field: str) -> list[tuple[Result, int, dict[str, Any]]]:
        """Every row of one table over a run's results: (result, row index, row with corrections applied)."""
        return [(r, i, row) for r in self.store.results(run_id) for i, row in enumerate(r.final.get(field) or [])]

    def correct_table_cells(self, run_id: int, field: str, rows: Sequence[dict[str, str]]) -> int:
        """A reviewed table grid (the cells' text, in the order of `table_rows`): every changed cell is a
        correction of that document's table. Returns how many cells; ValueError names the cell."""
        run = self.store.run(run_id)
        if run is None:
            raise LookupError(f"no extraction run {run_id}")
        spec = run.schema["properties"].get(field, {})
        if not is_table(spec):
            raise ValueError(f"'{field}' is not a table of this run")
        edited: dict[int, tuple[Result, list[dict[str, Any]]]] = {}
        changed = 0
        for (result, index, row), shown in zip(self.table_rows(run_id, field), rows, strict=False):
            for column, cell in columns(spec).items():
                if column not in shown or shown[column] == cell_text(row.get(column)):
                    continue
                table = edited.setdefault(result.id, (result, [dict(r) for r in result.final[field]]))[1]
                value = cell_value(shown[column], cell)
                table[index] = {**table[index], column: value} if value is not None else {
                    k: v for k, v in table[index].items() if k != column}
                changed += 1
        for result, table in edited.values():
            try:
                self.store.correct(result.id, field, table)
            except ValueError as err:
                raise ValueError(f"{result.document_name}, {err}") from err
        return changed

    def start_run(self, documents: Sequence[DocumentInfo], *, template: str, schema: dict[str, Any]) -> int:
        title = f"{template}: {len(documents)} document{'s' if len(documents) != 1 else ''}"
        run_id = self.store.create_run(template=template, schema=schema, title=title, documents_total=len(documents))
        with self._lock:
            self._live[run_id] = "waiting for the runs before it"
        self._jobs.put(_Job(run_id, tuple(documents), schema))
        return run_id

    def stop_run(self, run_id: int) -> None:
        with self._lock:
            self._stopped.add(run_id)

    def live(self, run_id: int) -> str:
        with self._lock:
            return self._live.get(run_id, "")

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                self._run(job)
            except Exception as err:  # keep the worker alive for the next run
                log.exception("extraction run %s failed", job.run_id)
                self.store.finish_run(job.run_id, error=f"internal error: {err}")
            with self._lock:
                self._live.pop(job.run_id, None)

    def _run(self, job: _Job) -> None:
        self.store.start_run(job.run_id)
        stopped = lambda: job.run_id in self._stopped  # noqa: E731
        for done, doc in enumerate(job.documents):
            if stopped():
                break
            try:
                steps = self.extractor.run(doc.id, job.schema, cancelled=stopped)
                while True:
                    step = next(steps)
                    waiting = f" (waiting, position {step.waiting})" if step.waiting else ""
                    with self._lock:
                        self._live[job.run_id] = f"document {done + 1} of {len(job.documents)} — {step.text}{waiting}"
            except StopIteration as finished:
                result: Extraction = finished.value
                problems = "; ".join(result.problems) or None
                self.store.save_result(job.run_id, doc.name, result.fields, document_id=doc.id,
                                       error=f"some parts failed: {problems}" if problems else None)
            except ExtractionFailed as err:
                self.store.save_result(job.run_id, doc.name, {}, document_id=doc.id, error=str(err))
            self.store.progress(job.run_id, done + 1)
        self.store.finish_run(job.run_id, error="stopped by the user" if stopped() else None)
