"""A person's corrections from the review tables, each looked for again on its document's pages.

The review shows a run as tables of cell texts; a cell whose text differs from what was shown becomes a
correction, typed by the field's schema and checked by the store. Each correction is searched for in
its document's page text like an extracted value (a table row by row, its cells near each other), so
the review can show where the new value stands — or that its pages do not hold it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from app.errors import Refused
from app.extraction.cells import cell_text, cell_value
from app.extraction.grounding import PageTexts, checkable
from app.extraction.json_schema import columns, is_table
from app.extraction.rows import place_row
from app.extraction.store import ExtractionStore, Result, Run

Pages = Callable[[int | None], Mapping[int, str]]  # a document's page texts ({} when it is gone)


def place_of(value: Any, spec: dict[str, Any], pages: Mapping[int, str]) -> dict[str, Any] | None:
    """Where a corrected value is on the pages: {value, page, snippet, verified} (a table: {value, rows},
    each row's page, snippet, verified and cells). None when there is nothing to look for or no text."""
    if value is None or not pages:
        return None
    texts = PageTexts(pages)
    if is_table(spec):
        return {"value": value, "rows": [dataclasses.asdict(place_row(row, texts)) for row in value]}
    found = texts.locate(value)
    items = value if isinstance(value, list) else [value]
    verified = True if found else (False if any(checkable(v) for v in items) else None)
    return {
        "value": value,
        "page": found[0] if found else None,
        "snippet": found[1] if found else "",
        "verified": verified,
    }


class Corrections:
    """Corrections of one store's results, each with its new place from `pages`."""

    def __init__(self, store: ExtractionStore, pages: Pages) -> None:
        self._store, self._pages = store, pages

    def cells(self, run: Run, rows: Sequence[dict[str, str]]) -> int:
        """The flat table (one dict of cell texts per result, in order): every changed cell is a
        correction. Returns how many; ValueError names the document and the cell."""
        changed = 0
        for result, row in zip(self._store.results(run.id), rows, strict=False):
            for name, spec in run.schema["properties"].items():
                if is_table(spec) or name not in row or _same(row[name], result.final.get(name), spec):
                    continue
                self._correct(result, name, cell_value(row[name], spec), spec, f"{result.document_name}, ")
                changed += 1
        return changed

    def table_rows(self, run: Run, field: str) -> list[tuple[Result, int, dict[str, Any]]]:
        """Every row of one table over a run's results: (result, row index, row with corrections applied)."""
        return [(r, i, row) for r in self._store.results(run.id) for i, row in enumerate(r.final.get(field) or [])]

    def table_cells(self, run: Run, field: str, rows: Sequence[dict[str, str]]) -> int:
        """A table grid (cell texts in the order of `table_rows`): every changed cell is a correction of
        that document's table. Returns how many cells; ValueError names the document and the cell."""
        spec = run.schema["properties"].get(field, {})
        if not is_table(spec):
            raise Refused(f"'{field}' is not a table of this run")
        edited: dict[int, tuple[Result, list[dict[str, Any]]]] = {}
        changed = 0
        for (result, index, row), shown in zip(self.table_rows(run, field), rows, strict=False):
            for column, cell in columns(spec).items():
                if column not in shown or _same(shown[column], row.get(column), cell):
                    continue
                table = edited.setdefault(result.id, (result, [dict(r) for r in result.final[field]]))[1]
                value = cell_value(shown[column], cell)
                table[index] = (
                    {**table[index], column: value}
                    if value is not None
                    else {k: v for k, v in table[index].items() if k != column}
                )
                changed += 1
        for result, table in edited.values():
            self._correct(result, field, table, spec, f"{result.document_name}, ")
        return changed

    def _correct(self, result: Result, name: str, value: Any, spec: dict[str, Any], prefix: str) -> None:
        try:
            self._store.correct(result.id, name, value, place=place_of(value, spec, self._pages(result.document_id)))
        except ValueError as err:
            raise Refused(f"{prefix}{err}") from err


def _same(text: str, value: Any, spec: dict[str, Any]) -> bool:
    """Whether a cell's text still says the value (as shown, or the same value written another way)."""
    return text == cell_text(value) or cell_value(text, spec) == value
