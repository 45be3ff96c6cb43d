"""The review of an extraction run: per document its flat fields, each with its page and a badge saying
whether the page has it, and under them each table as a grid with a badge per cell (HTML); and the
editable grids' values with a flag on every cell (✓ found on its page, ? not found, ⚠ conflict,
✎ corrected). A corrected value shows where it was found again, and what it was."""

from __future__ import annotations

import html
from typing import Any

from app.extraction.cells import cell_text
from app.extraction.exports import row_place
from app.extraction.json_schema import columns, is_table
from app.extraction.store import Result, Run

# a flag's mark and the cell's colour in the editable grids; an editable cell shows its value itself, so
# the mark travels in the cell's style, as --q-flag, which quartet.css writes after the text (::after)
_FLAGS = {
    "ok": ("✓", ""),
    "unverified": ("?", "background-color: rgba(255, 176, 32, 0.28);"),
    "conflict": ("⚠", "background-color: rgba(230, 60, 60, 0.22);"),
    "corrected": ("✎", "background-color: rgba(60, 130, 240, 0.20);"),
    "missing": ("–", "background-color: rgba(128, 128, 128, 0.12);"),  # nothing found for it: an empty cell
    "": ("", ""),
}


def review(run: Run, results: list[Result]) -> str:
    parts = []
    for result in results:
        flat = [name for name, spec in run.schema["properties"].items() if not is_table(spec)]
        items = "".join(_field(result, name) for name in flat if result.final.get(name) is not None)
        grids = "".join(
            _grid(run, result, name) if result.final.get(name) else _no_rows(name)
            for name, spec in run.schema["properties"].items()
            if is_table(spec)
        )
        error = f"<div class='q-warn'>⚠ {html.escape(result.error)}</div>" if result.error else ""
        parts.append(
            f"<details class='q-review' open><summary>{html.escape(result.document_name)}</summary>"
            f"{error}<ul>{items}</ul>{grids}</details>"
        )
    return "".join(parts)


def flat_grid(run: Run, results: list[Result]) -> dict[str, Any]:
    """The results table's value: one row per document, its flat fields, a flag on every cell."""
    names = [n for n, spec in run.schema["properties"].items() if not is_table(spec)]
    rows = [[(r.document_name, "")] + [(cell_text(r.final.get(n)), _field_flag(r, n)) for n in names] for r in results]
    return _flagged(["document", *names], rows)


def table_grid(run: Run, field: str, rows: list[tuple[Result, int, dict[str, Any]]]) -> dict[str, Any]:
    """One table's rows over every document (document, row number, the columns), a flag on every cell."""
    cols = list(columns(run.schema["properties"][field]))
    shown = []
    for result, index, row in rows:
        cells = row_place(result, field, index).get("cells") or {}
        original = _original_row(result, field, index)
        shown.append(
            [(result.document_name, ""), (str(index + 1), "")]
            + [
                (
                    cell_text(row.get(c)),
                    _cell_flag(
                        row.get(c), original.get(c), (cells.get(c) or {}).get("verified"), field in result.corrected
                    ),
                )
                for c in cols
            ]
        )
    return _flagged(["document", "row", *cols], shown)


def widths(headers: list[str]) -> list[str | int]:
    """Column widths that hold each header on one line, whatever the column holds (even nothing)."""
    return [f"{max(96, 9 * len(header) + 48)}px" for header in headers]


def _flagged(headers: list[str], rows: list[list[tuple[str, str]]]) -> dict[str, Any]:
    data = [[text for text, _ in row] for row in rows]
    marks = [[f"{text} {_FLAGS[flag][0]}".strip() if _FLAGS[flag][0] else text for text, flag in row] for row in rows]
    styles = [[_style(flag) for _, flag in row] for row in rows]
    return {"headers": headers, "data": data, "metadata": {"display_value": marks, "styling": styles} if rows else None}


def _style(flag: str) -> str:
    mark, colour = _FLAGS[flag]
    return f"--q-flag: '{mark}'; {colour}".strip() if mark else ""


def _field_flag(result: Result, name: str) -> str:
    info = result.fields.get(name) or {}
    if name in result.corrected:
        return "corrected"
    if not cell_text(result.final.get(name)):
        return "missing"
    if info.get("conflict"):
        return "conflict"
    return {True: "ok", False: "unverified", None: ""}[info.get("verified")]


def _unsure(info: dict[str, Any]) -> str:
    """A badge for a value found only in text read by OCR with low confidence."""
    return " " + _badge("q-warn", "low OCR confidence: check the scan") if info.get("unsure") else ""


def _cell_flag(value: Any, original: Any, verified: bool | None, corrected: bool) -> str:
    if corrected and cell_text(value) != cell_text(original):
        return "corrected"
    if not cell_text(value):
        return "missing"
    return {True: "ok", False: "unverified", None: ""}[verified if value is not None else None]


def _original_row(result: Result, field: str, index: int) -> dict[str, Any]:
    extracted = result.record.get(field) or []
    return extracted[index] if index < len(extracted) and isinstance(extracted[index], dict) else {}


def _field(result: Result, name: str) -> str:
    info, value = result.fields.get(name) or {}, result.final.get(name)
    was = ""
    if name in result.corrected:
        info = info.get("correction") or {}
        badge = _badge("q-ok", "corrected") + (" " + _verdict(info.get("verified")) if info else "")
        was = f" <span class='q-was'>was: {html.escape(cell_text(result.record.get(name)) or '—')}</span>"
    elif info.get("conflict"):
        others = "; ".join(f"{cell_text(c['value'])} (p. {c['page']})" for c in info.get("conflicts", []))
        badge = _badge("q-warn", f"conflict: {others}")
    else:
        badge = _verdict(info.get("verified")) + _unsure(info)
    page = f"p. {info['page']}" if info.get("page") else ""
    snippet = html.escape(info.get("snippet") or "")
    return (
        f"<li><b>{html.escape(name)}</b>: {html.escape(cell_text(value))} <i>{page}</i> {badge}{was}"
        f"{f'<div class=q-snippet>{snippet}</div>' if snippet else ''}</li>"
    )


def _grid(run: Run, result: Result, name: str) -> str:
    cols = list(columns(run.schema["properties"][name]))
    corrected = name in result.corrected
    head = "".join(f"<th>{html.escape(c)}</th>" for c in ["#", *cols, "page", ""])
    body = []
    for index, row in enumerate(result.final[name]):
        place, original = row_place(result, name, index), _original_row(result, name, index)
        edited = corrected and any(cell_text(row.get(c)) != cell_text(original.get(c)) for c in cols)
        cells = "".join(
            _cell(
                row.get(c),
                (place.get("cells") or {}).get(c),
                corrected and cell_text(row.get(c)) != cell_text(original.get(c)),
            )
            for c in cols
        )
        if edited:
            verdict = _badge("q-ok", "corrected")
        elif place.get("conflict"):
            others = ", ".join(str(i + 1) for i in place.get("conflicts_with", []))
            verdict = _badge("q-warn", f"conflict with row {others}")
        else:
            verdict = _verdict(place.get("verified"), row=True) + _unsure(place)
        body.append(f"<tr><td>{index + 1}</td>{cells}<td>{place.get('page') or ''}</td><td>{verdict}</td></tr>")
    return (
        f"<div class='q-grid-title'>{html.escape(name)}</div>"
        f"<table class='q-grid' data-table='{html.escape(name)}'><tr>{head}</tr>{''.join(body)}</table>"
    )


def _no_rows(name: str) -> str:
    """A table the model found no rows for is said to be empty, not left out (it looked like a failure)."""
    return (
        f"<div class='q-grid-title'>{html.escape(name)}</div>"
        f"<p class='q-muted' data-table='{html.escape(name)}'>no rows found in this document</p>"
    )


def _cell(value: Any, info: dict[str, Any] | None, corrected: bool) -> str:
    text = html.escape(cell_text(value))
    if corrected:
        title = html.escape((info or {}).get("snippet") or "corrected; not found near its row")
        return f"<td title='{title}'>{text} <span class='q-ok'>✎</span></td>"
    if value is None or info is None:
        return f"<td>{text}</td>"
    mark = {True: ("q-ok", "✓"), False: ("q-warn", "?"), None: ("q-muted", "·")}[info.get("verified")]
    title = html.escape(info.get("snippet") or "not found near its row")
    return f"<td title='{title}'>{text} <span class='{mark[0]}'>{mark[1]}</span></td>"


def _verdict(verified: bool | None, *, row: bool = False) -> str:
    if verified is False:
        return _badge(
            "q-warn", "unverified: not found together on its page" if row else "unverified: not found on its page"
        )
    if verified is None:
        return _badge("q-muted", "cannot be checked in the text")
    return _badge("q-ok", "found on the page")


def _badge(kind: str, text: str) -> str:
    return f"<span class='{kind}'>{html.escape(text)}</span>"
