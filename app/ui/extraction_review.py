"""The review of an extraction run as HTML: per document its flat fields, each with its page and a
badge saying whether the page has it, and under them each table as a grid with a badge per cell."""

from __future__ import annotations

import html
from typing import Any

from app.extraction.cells import cell_text
from app.extraction.schemas import columns, is_table
from app.extraction.store import Result, Run


def review(run: Run, results: list[Result]) -> str:
    parts = []
    for result in results:
        flat = [name for name, spec in run.schema["properties"].items() if not is_table(spec)]
        items = "".join(_field(result, name) for name in flat if result.final.get(name) is not None)
        grids = "".join(_grid(run, result, name) for name, spec in run.schema["properties"].items()
                        if is_table(spec) and result.final.get(name))
        error = f"<div class='q-warn'>⚠ {html.escape(result.error)}</div>" if result.error else ""
        parts.append(f"<details class='q-review' open><summary>{html.escape(result.document_name)}</summary>"
                     f"{error}<ul>{items}</ul>{grids}</details>")
    return "".join(parts)


def _field(result: Result, name: str) -> str:
    info, value = result.fields.get(name) or {}, result.final.get(name)
    if name in result.corrected:
        badge = _badge("q-ok", "corrected")
    elif info.get("conflict"):
        others = "; ".join(f"{cell_text(c['value'])} (p. {c['page']})" for c in info.get("conflicts", []))
        badge = _badge("q-warn", f"conflict: {others}")
    else:
        badge = _verdict(info.get("verified"))
    page = f"p. {info['page']}" if info.get("page") else ""
    snippet = html.escape(info.get("snippet") or "")
    return (f"<li><b>{html.escape(name)}</b>: {html.escape(cell_text(value))} <i>{page}</i> {badge}"
            f"{f'<div class=q-snippet>{snippet}</div>' if snippet else ''}</li>")


def _grid(run: Run, result: Result, name: str) -> str:
    cols = list(columns(run.schema["properties"][name]))
    corrected = name in result.corrected
    places: list[dict[str, Any]] = [] if corrected else (result.fields.get(name) or {}).get("rows", [])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in ["#", *cols, "page", ""])
    body = []
    for index, row in enumerate(result.final[name]):
        place = places[index] if index < len(places) else {}
        cells = "".join(_cell(row.get(c), (place.get("cells") or {}).get(c), corrected) for c in cols)
        if corrected:
            verdict = _badge("q-ok", "corrected")
        elif place.get("conflict"):
            others = ", ".join(str(i + 1) for i in place.get("conflicts_with", []))
            verdict = _badge("q-warn", f"conflict with row {others}")
        else:
            verdict = _verdict(place.get("verified"), row=True)
        body.append(f"<tr><td>{index + 1}</td>{cells}<td>{place.get('page') or ''}</td><td>{verdict}</td></tr>")
    return (f"<div class='q-grid-title'>{html.escape(name)}</div>"
            f"<table class='q-grid' data-table='{html.escape(name)}'><tr>{head}</tr>{''.join(body)}</table>")


def _cell(value: Any, info: dict[str, Any] | None, corrected: bool) -> str:
    text = html.escape(cell_text(value))
    if value is None or corrected or info is None:
        return f"<td>{text}</td>"
    mark = {True: ("q-ok", "✓"), False: ("q-warn", "?"), None: ("q-muted", "·")}[info.get("verified")]
    title = html.escape(info.get("snippet") or "not found near its row")
    return f"<td title='{title}'>{text} <span class='{mark[0]}'>{mark[1]}</span></td>"


def _verdict(verified: bool | None, *, row: bool = False) -> str:
    if verified is False:
        return _badge("q-warn", "unverified: not found together on its page" if row else
                      "unverified: not found on its page")
    if verified is None:
        return _badge("q-muted", "cannot be checked in the text")
    return _badge("q-ok", "found on the page")


def _badge(kind: str, text: str) -> str:
    return f"<span class='{kind}'>{html.escape(text)}</span>"
