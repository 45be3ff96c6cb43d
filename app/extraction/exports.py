"""Exports of a run: a CSV of the flat fields (one row per document), a CSV per table (one row per
table row, with the document and row number), and JSON that keeps the nesting with pages and snippets.
Every CSV starts with a byte order mark so Excel reads UTF-8; cells that would be formulas are defused."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.errors import NotFound
from app.extraction.cells import cell_text
from app.extraction.json_schema import columns, is_table

if TYPE_CHECKING:
    from app.extraction.store import Result, Run

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def flat_csv(run: Run, results: list[Result]) -> str:
    """One row per document: its name, one column per field in schema order (a table's column holds
    its number of rows: the rows are in `table_csv`), unverified fields, error.
    """
    names = list(run.schema["properties"])
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["document", *names, "unverified", "error"])
    for result in results:
        final = result.final
        tables = {n for n in names if is_table(run.schema["properties"][n])}
        values = [(len(final[n]) if n in final else "") if n in tables else _cell(final.get(n)) for n in names]
        writer.writerow([_cell(result.document_name), *values, _cell(result.unverified), _cell(result.error)])
    return "\ufeff" + out.getvalue()


def table_csv(run: Run, results: list[Result], field: str) -> str:
    """One table of every document, one CSV row per table row: document, row number (from 1), the
    columns, and the page the row was found on, whether it was verified there, and any conflict."""
    cols = list(columns(run.schema["properties"].get(field, {})))
    if not cols:
        raise NotFound(f"'{field}' is not a table of {run.title or run.template}")
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["document", "row", *cols, "page", "verified", "conflict"])
    for result in results:
        for index, row in enumerate(result.final.get(field) or []):
            place = row_place(result, field, index)
            verified = {True: "yes", False: "no", None: ""}[place.get("verified")]
            writer.writerow(
                [
                    _cell(result.document_name),
                    index + 1,
                    *(_cell(row.get(c)) for c in cols),
                    place.get("page") or "",
                    verified,
                    "yes" if place.get("conflict") else "",
                ]
            )
    return "\ufeff" + out.getvalue()


def row_place(result: Result, field: str, index: int) -> dict[str, Any]:
    """Where row `index` of a table stands: as extracted, or (a corrected table) as found again."""
    info = result.fields.get(field) or {}
    if field in result.corrected:
        info = info.get("correction") or {}
    places = info.get("rows") or []
    return places[index] if index < len(places) else {}


def json_export(run: Run, results: list[Result]) -> str:
    """A list of {document, status, error, record (corrections applied), fields, corrected, original}:
    `original` holds the extracted value of each corrected field (null: the model gave none), and a
    corrected field's entry in `fields` its `correction`, where the new value stands on the pages."""
    names = list(run.schema["properties"])
    documents = []
    for result in results:
        final = result.final
        documents.append(
            {
                "document": result.document_name,
                "status": result.status,
                "error": result.error,
                "record": {name: final[name] for name in names if name in final},
                "fields": result.fields,
                "corrected": result.corrected,
                "original": {name: result.record.get(name) for name in result.corrected},
            }
        )
    return json.dumps(documents, ensure_ascii=False, indent=2)


@dataclass(frozen=True)
class RunExport:
    """A run's exports as text: the flat CSV, the JSON, and one CSV per table field."""

    run_id: int
    stem: str  # a file name without its suffix: extraction-<id>-<template>
    csv: str
    json: str
    tables: dict[str, str]

    def write(self, folder: Path) -> tuple[Path, Path, list[Path]]:
        """The exports as files in `folder`: (CSV, JSON, the tables' CSVs)."""
        folder.mkdir(parents=True, exist_ok=True)
        csv_path, json_path = folder / f"{self.stem}.csv", folder / f"{self.stem}.json"
        csv_path.write_text(self.csv, encoding="utf-8")
        json_path.write_text(self.json, encoding="utf-8")
        tables = []
        for name, text in self.tables.items():
            tables.append(folder / f"{self.stem}-{name}.csv")
            tables[-1].write_text(text, encoding="utf-8")
        return csv_path, json_path, tables


def run_export(run: Run, results: list[Result]) -> RunExport:
    tables = {name: table_csv(run, results, name) for name, spec in run.schema["properties"].items() if is_table(spec)}
    return RunExport(
        run.id, f"extraction-{run.id}-{run.template}", flat_csv(run, results), json_export(run, results), tables
    )


def _cell(value: Any) -> str | int | float:
    """A CSV cell: numbers as numbers, lists joined with "; ", text that Excel would run defused."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    text = cell_text(value)
    return "'" + text if text.startswith(_FORMULA_STARTS) else text
