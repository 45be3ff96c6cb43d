"""One record per document from the records of its parts, each field with the page it was found on.

A long document is read in parts (runs of consecutive pages); each part yields a record. Values equal
after folding (case and spaces for text, numeric value for numbers, the day for dates) count as one.
A scalar the parts disagree on is a conflict: the value kept is the one found on its part's pages,
then the one most parts gave, and all candidates are listed with their pages. Lists are unioned.
Tables: the rows of all parts are appended in page order; rows equal in every cell (folded as above)
count as one; rows that agree on their key columns (the table's required columns, or else its first
column: `json_schema.key_columns`) but differ in another cell are all kept and flagged as conflicts.
Page and snippet come from the page text (`grounding.locate`, `rows.place_row`), never from the model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.extraction.grounding import PageTexts, checkable, iso_date, normalise
from app.extraction.json_schema import TABLE, columns, field_types, key_columns, type_word
from app.extraction.rows import Cell, place_row

_LIST = "list of "


@dataclass(frozen=True)
class PartResult:
    """What the model returned for one part of a document, and the page numbers that part covered."""

    pages: tuple[int, ...]
    record: dict[str, Any]


@dataclass(frozen=True)
class Candidate:
    """One distinct value, where it was found, and how many parts gave it."""

    value: Any
    page: int | None
    snippet: str
    verified: bool | None  # None: a yes/no value, which text cannot confirm
    parts: int = 1


@dataclass(frozen=True)
class FieldValue:
    """A merged field: its value, its provenance, and the candidates when the parts disagreed."""

    name: str
    value: Any
    page: int | None
    snippet: str
    verified: bool | None
    conflicts: list[Candidate] = field(default_factory=list)
    conflict: bool = False
    items: list[Candidate] = field(default_factory=list)  # lists only: where each item was found
    rows: list[TableRow] = field(default_factory=list)  # tables only: where each row was found
    unsure: bool = False  # found only in text read by OCR with low confidence (a row of it, for a table)


@dataclass(frozen=True)
class TableRow:
    """One row of a table: its cells, where it was found, and the rows it conflicts with (by index)."""

    values: dict[str, Any]
    page: int | None
    snippet: str
    verified: bool | None
    cells: dict[str, Cell]
    parts: int = 1
    conflict: bool = False
    conflicts_with: list[int] = field(default_factory=list)
    unsure: bool = False  # found only in text read by OCR with low confidence


Merged = dict[str, FieldValue]


def merge(parts: Sequence[PartResult], schema: dict[str, Any], page_texts: Mapping[int, str]) -> Merged:
    """The fields of the schema that any part found, in schema order; absent fields are left out."""
    merged: Merged = {}
    texts = PageTexts(page_texts)
    for name, kind in field_types(schema).items():
        found = [(part, part.record[name]) for part in parts if _present(part.record.get(name))]
        if not found:
            continue
        if kind == TABLE:
            merged[name] = _merge_table(name, schema["properties"][name], found, texts)
        elif kind.startswith(_LIST):
            items = [(part, item) for part, value in found for item in _as_list(value) if _present(item)]
            merged[name] = _merge_list(name, _candidates(kind.removeprefix(_LIST), items, texts))
        else:
            merged[name] = _merge_scalar(name, _candidates(kind, found, texts))
    return merged


def mark_unsure(merged: Merged, page_texts: Mapping[int, str], unsure_pages: set[int]) -> Merged:
    """Fields and table rows grounded only on `unsure_pages` (read by OCR with low confidence) are marked
    `unsure`: the value is in the text, but that text may be misread."""
    if not unsure_pages:
        return merged
    sure = PageTexts({n: t for n, t in page_texts.items() if n not in unsure_pages})

    def only_unsure(value: Any, page: int | None, verified: bool | None) -> bool:
        return verified is True and page in unsure_pages and sure.locate(value) is None

    marked: Merged = {}
    for name, fv in merged.items():
        if fv.rows:
            rows = [dataclasses.replace(r, unsure=only_unsure(list(r.values.values()), r.page, r.verified))
                    for r in fv.rows]  # fmt: skip
            marked[name] = dataclasses.replace(fv, rows=rows, unsure=any(r.unsure for r in rows))
        else:
            marked[name] = dataclasses.replace(fv, unsure=only_unsure(fv.value, fv.page, fv.verified))
    return marked


def within_max_items(merged: Merged, schema: dict[str, Any]) -> tuple[Merged, list[str]]:
    """The tables and lists that the parts together made longer than their `maxItems`, cut to it (the
    first rows kept), and a sentence for each cut."""
    notes = []
    kept = dict(merged)
    for name, fv in merged.items():
        limit = schema["properties"][name].get("maxItems")
        if isinstance(fv.value, list) and limit is not None and len(fv.value) > limit:
            kept[name] = dataclasses.replace(fv, value=fv.value[:limit], rows=fv.rows[:limit], items=fv.items[:limit])
            notes.append(f"'{name}' had {len(fv.value)} rows over all parts; the first {limit} (its maxItems) are kept")
    return kept, notes


def record_of(fields: Mapping[str, FieldValue]) -> dict[str, Any]:
    """The plain record: field name → value."""
    return {name: fv.value for name, fv in fields.items()}


def provenance(fv: FieldValue) -> dict[str, Any]:
    """Everything about a field but its name and value, as JSON-ready data."""
    return {k: v for k, v in dataclasses.asdict(fv).items() if k not in ("name", "value")}


def _merge_scalar(name: str, candidates: list[Candidate]) -> FieldValue:
    if len(candidates) == 1:
        only = candidates[0]
        return FieldValue(name, only.value, only.page, only.snippet, only.verified)
    best = max(candidates, key=lambda c: (c.verified is True, c.parts))  # the first of equals wins
    return FieldValue(name, best.value, best.page, best.snippet, best.verified, candidates, conflict=True)


def _merge_list(name: str, items: list[Candidate]) -> FieldValue:
    checked = [c.verified for c in items if c.verified is not None]
    shown = next((c for c in items if c.verified), items[0])
    verified = all(checked) if checked else None
    return FieldValue(name, [c.value for c in items], shown.page, shown.snippet, verified, items=items)


def _merge_table(name: str, spec: dict[str, Any], found: list[tuple[PartResult, Any]], texts: PageTexts) -> FieldValue:
    kinds = {column: type_word(cell) for column, cell in columns(spec).items()}
    rows: dict[tuple[Any, ...], TableRow] = {}
    for part, value in found:
        for given in _as_list(value):
            values = {c: given[c] for c in kinds if isinstance(given, dict) and _present(given.get(c))}
            if not values:
                continue
            key = tuple(_key(kinds[c], values.get(c)) if c in values else None for c in kinds)
            seen = rows.get(key)
            place = place_row(values, texts, within=part.pages) if seen is None or not seen.verified else None
            if seen is None:
                rows[key] = _table_row(values, place)
            elif place is not None and place.verified:
                rows[key] = dataclasses.replace(_table_row(seen.values, place), parts=seen.parts + 1)
            else:
                rows[key] = dataclasses.replace(seen, parts=seen.parts + 1)
    listed = _flag_conflicts(list(rows.values()), key_columns(spec), kinds)
    checked = [r.verified for r in listed if r.verified is not None]
    first = listed[0] if listed else None
    return FieldValue(
        name,
        [r.values for r in listed],
        first.page if first else None,
        first.snippet if first else "",
        all(checked) if checked else None,
        conflict=any(r.conflict for r in listed),
        rows=listed,
    )


def _table_row(values: dict[str, Any], place: Any) -> TableRow:
    return TableRow(values, place.page, place.snippet, place.verified, place.cells)


def _flag_conflicts(rows: list[TableRow], keys: list[str], kinds: dict[str, str]) -> list[TableRow]:
    """Rows that share their key cells but not the others point at each other."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for index, row in enumerate(rows):
        if all(k in row.values for k in keys):
            groups.setdefault(tuple(_key(kinds[k], row.values[k]) for k in keys), []).append(index)
    flagged = list(rows)
    for members in groups.values():
        if len(members) > 1:
            for i in members:
                flagged[i] = dataclasses.replace(rows[i], conflict=True, conflicts_with=[j for j in members if j != i])
    return flagged


def _candidates(kind: str, found: list[tuple[PartResult, Any]], texts: PageTexts) -> list[Candidate]:
    """Distinct values in order of first appearance; a value missed on one part may be found on another."""
    by_key: dict[tuple[str, Any], Candidate] = {}
    for part, value in found:
        key = _key(kind, value)
        seen = by_key.get(key)
        if seen is None:
            by_key[key] = _candidate(value, part, texts)
            continue
        seen = dataclasses.replace(seen, parts=seen.parts + 1)
        if seen.verified is False and (again := _candidate(seen.value, part, texts)).verified:
            seen = dataclasses.replace(seen, page=again.page, snippet=again.snippet, verified=True)
        by_key[key] = seen
    return list(by_key.values())


def _candidate(value: Any, part: PartResult, texts: PageTexts) -> Candidate:
    found = texts.locate(value, within=part.pages)
    if found is not None:
        return Candidate(value, found[0], found[1], True)
    first = part.pages[0] if part.pages else None
    return Candidate(value, first, "", False if checkable(value) else None)


def _key(kind: str, value: Any) -> tuple[str, Any]:
    """What makes two values the same for this kind of field."""
    if kind in ("number", "integer") and not isinstance(value, bool):
        try:
            return "number", round(float(value), 9)
        except (TypeError, ValueError):
            pass
    if kind == "date" and isinstance(value, str) and (day := iso_date(value)):
        return "date", day
    if isinstance(value, bool):
        return "bool", value
    return "text", normalise(str(value))


def _present(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, str):
        return bool(value.strip())
    if isinstance(value, list):
        return any(_present(item) for item in value)
    return True


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
