"""Extraction runs and their per-document results in SQLite, with the user's corrections and exports.

extraction_runs     one row per run: the template and its schema, status, progress, and its owner (who
                    started it: a login, a browser, an API client; only they see it)
extraction_results  one row per document: the merged record, each field's provenance (page, snippet,
                    verified, conflicts; for a corrected field also `correction`, where the new value
                    was found), and `corrected`, the user's edits (field → value), which win over the
                    extracted value in every export; the original stays as it was extracted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlite_utils

from app.database import Database, now
from app.errors import NotFound, Refused
from app.extraction import exports
from app.extraction.json_schema import validator
from app.extraction.merge import FieldValue, provenance, record_of

MIGRATIONS = sqlite_utils.Migrations("extraction")


@MIGRATIONS(name="001_extraction")
def _m001_extraction(db: sqlite_utils.Database) -> None:
    db.table("extraction_runs").create(
        {
            "id": int,
            "template": str,  # a template's name, or "" for a schema made in the UI
            "schema": str,  # JSON
            "title": str,
            "status": str,  # queued | running | done | stopped | error
            "created_at": str,
            "finished_at": str,
            "error": str,
            "documents_total": int,
            "documents_done": int,
        },
        pk="id",
        not_null={"schema", "status", "created_at"},
        defaults={"documents_total": 0, "documents_done": 0},
    )
    db.table("extraction_results").create(
        {
            "id": int,
            "run_id": int,
            "document_id": int,  # the knowledge base's document, when it came from there
            "document_name": str,
            "status": str,  # done | error
            "error": str,
            "record": str,  # JSON: field → value, as extracted
            "fields": str,  # JSON: field → page, snippet, verified, conflict, conflicts, items
            "corrected": str,  # JSON: field → value, the user's edits (null clears a field)
            "updated_at": str,
        },
        pk="id",
        not_null={"run_id", "document_name", "status"},
        foreign_keys=[("run_id", "extraction_runs", "id")],
    )
    db.table("extraction_results").create_index(["run_id", "id"])


@MIGRATIONS(name="002_run_owner")
def _m002_run_owner(db: sqlite_utils.Database) -> None:
    # Runs from before had no owner: "" is nobody's, so no caller sees them.
    db.table("extraction_runs").add_column("owner", str, not_null_default="")
    db.table("extraction_runs").create_index(["owner", "id"])


@dataclass(frozen=True)
class Run:
    id: int
    template: str
    schema: dict[str, Any]
    title: str
    status: str
    created_at: str
    finished_at: str | None
    error: str | None
    documents_total: int
    documents_done: int
    owner: str = ""


@dataclass(frozen=True)
class Result:
    id: int
    run_id: int
    document_id: int | None
    document_name: str
    status: str
    error: str | None
    record: dict[str, Any]  # as extracted
    fields: dict[str, dict[str, Any]]  # provenance per field
    corrected: dict[str, Any]  # the user's edits
    updated_at: str

    @property
    def final(self) -> dict[str, Any]:
        """The record with the user's corrections applied (a correction to null removes the field)."""
        merged = {**self.record, **self.corrected}
        return {name: value for name, value in merged.items() if value is not None}

    @property
    def unverified(self) -> list[str]:
        """Fields whose value was not found on its pages and that the user has not corrected."""
        final = self.final
        return [
            name
            for name, info in self.fields.items()
            if info.get("verified") is False and name in final and name not in self.corrected
        ]


class ExtractionStore:
    def __init__(self, database: Database) -> None:
        self._database = database
        database.migrate(MIGRATIONS)

    def create_run(
        self, *, template: str, schema: dict[str, Any], title: str, documents_total: int, owner: str = ""
    ) -> int:
        row = {
            "owner": owner,
            "template": template,
            "schema": json.dumps(schema, ensure_ascii=False),
            "title": title,
            "status": "queued",
            "created_at": now(),
            "documents_total": documents_total,
        }
        with self._database.atomic() as db:
            return int(db.table("extraction_runs").insert(row).last_pk or 0)

    def start_run(self, run_id: int) -> None:
        self._update_run(run_id, {"status": "running"})

    def progress(self, run_id: int, documents_done: int) -> None:
        self._update_run(run_id, {"documents_done": documents_done})

    def finish_run(self, run_id: int, *, error: str | None = None, stopped: bool = False) -> None:
        """Mark the run done, stopped by a person, or failed with `error` (a sentence for people)."""
        status = "stopped" if stopped else "error" if error else "done"
        self._update_run(run_id, {"status": status, "error": error, "finished_at": now()})

    def delete_run(self, run_id: int) -> None:
        with self._database.atomic() as db:
            db.execute("DELETE FROM extraction_results WHERE run_id = ?", [run_id])
            db.execute("DELETE FROM extraction_runs WHERE id = ?", [run_id])

    def save_result(
        self,
        run_id: int,
        document_name: str,
        fields: Mapping[str, FieldValue],
        *,
        document_id: int | None = None,
        error: str | None = None,
    ) -> int:
        """Store one document's merged fields (or, with `error`, what went wrong and any partial fields)."""
        row = {
            "run_id": run_id,
            "document_id": document_id,
            "document_name": document_name,
            "status": "error" if error else "done",
            "error": error,
            "record": _dumps(record_of(fields)),
            "fields": _dumps({name: provenance(fv) for name, fv in fields.items()}),
            "corrected": "{}",
            "updated_at": now(),
        }
        with self._database.atomic() as db:
            return int(db.table("extraction_results").insert(row).last_pk or 0)

    def correct(self, result_id: int, field: str, value: Any, *, place: dict[str, Any] | None = None) -> None:
        """Record the user's value for a field (None clears it); ValueError when the schema forbids it.
        `place` is where the new value stands on the document's pages (see `corrections.place_of`)."""
        with self._database.atomic():
            result = self.result(result_id)
            run = self.run(result.run_id) if result else None
            if result is None or run is None:
                raise NotFound(f"no extraction result {result_id}")
            spec = run.schema["properties"].get(field)
            if spec is None:
                raise Refused(f"'{field}' is not a field of {run.title or run.template}")
            if value is not None:
                problem = next(validator(spec).iter_errors(value), None)
                if problem is not None:
                    where = "/".join(str(p) for p in (field, *problem.absolute_path))
                    raise Refused(f"{where}: {problem.message}")
            self._set_corrected(result, {**result.corrected, field: value}, field, place)

    def revert(self, result_id: int, field: str) -> None:
        """Drop the user's correction of a field: the extracted value counts again."""
        with self._database.atomic():
            result = self.result(result_id)
            if result is None:
                raise NotFound(f"no extraction result {result_id}")
            self._set_corrected(result, {k: v for k, v in result.corrected.items() if k != field}, field, None)

    def run(self, run_id: int) -> Run | None:
        with self._database.read() as db:
            rows = list(db.table("extraction_runs").rows_where("id = ?", [run_id]))
        return _run(rows[0]) if rows else None

    def runs(self, limit: int = 100, *, owner: str | None = None) -> list[Run]:
        """Newest first; with `owner`, only theirs."""
        where, args = ("owner = ?", [owner]) if owner is not None else (None, [])
        with self._database.read() as db:
            rows = list(db.table("extraction_runs").rows_where(where, args, order_by="id desc", limit=limit))
        return [_run(row) for row in rows]

    def result(self, result_id: int) -> Result | None:
        with self._database.read() as db:
            rows = list(db.table("extraction_results").rows_where("id = ?", [result_id]))
        return _result(rows[0]) if rows else None

    def results(self, run_id: int) -> list[Result]:
        with self._database.read() as db:
            rows = list(db.table("extraction_results").rows_where("run_id = ?", [run_id], order_by="id"))
        return [_result(row) for row in rows]

    def export_csv(self, run_id: int) -> str:
        """One row per document, one column per field (see `exports.flat_csv`)."""
        return exports.flat_csv(*self._run_and_results(run_id))

    def export_table_csv(self, run_id: int, field: str) -> str:
        """One CSV row per row of the table `field` of every document (see `exports.table_csv`)."""
        return exports.table_csv(*self._run_and_results(run_id), field)

    def export_json(self, run_id: int) -> str:
        """A list of {document, status, error, record (corrections applied), fields, corrected}."""
        return exports.json_export(*self._run_and_results(run_id))

    def _run_and_results(self, run_id: int) -> tuple[Run, list[Result]]:
        with self._database.read():  # the run and its results from one snapshot
            run = self.run(run_id)
            if run is None:
                raise NotFound(f"no extraction run {run_id}")
            return run, self.results(run_id)

    def _set_corrected(
        self, result: Result, corrected: dict[str, Any], field: str, place: dict[str, Any] | None
    ) -> None:
        fields = {
            name: {k: v for k, v in info.items() if k != "correction" or name != field}
            for name, info in result.fields.items()
        }
        if place is not None:
            fields[field] = {**fields.get(field, {}), "correction": place}
        with self._database.atomic() as db:
            changes = {"corrected": _dumps(corrected), "fields": _dumps(fields), "updated_at": now()}
            db.table("extraction_results").update(result.id, changes)

    def _update_run(self, run_id: int, changes: dict[str, Any]) -> None:
        with self._database.atomic() as db:
            db.table("extraction_runs").update(run_id, changes)


def _run(row: dict[str, Any]) -> Run:
    return Run(
        row["id"],
        row["template"] or "",
        json.loads(row["schema"]),
        row["title"] or "",
        row["status"],
        row["created_at"],
        row["finished_at"],
        row["error"],
        row["documents_total"],
        row["documents_done"],
        row.get("owner") or "",
    )


def _result(row: dict[str, Any]) -> Result:
    return Result(
        row["id"],
        row["run_id"],
        row["document_id"],
        row["document_name"],
        row["status"],
        row["error"],
        json.loads(row["record"] or "{}"),
        json.loads(row["fields"] or "{}"),
        json.loads(row["corrected"] or "{}"),
        row["updated_at"],
    )


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
