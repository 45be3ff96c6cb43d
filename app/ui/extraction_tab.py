"""The Extraction tab: a template (or custom schema) over documents, results as a table to review and
correct, each value flagged with whether its page really says it; each table of the schema as a grid
under its record, and as an editable grid of all documents' rows; CSV (one per table) and JSON.
Handlers call the extraction service only; every handler that can fail is queued, so its message
reaches the page (an unqueued handler's gr.Error shows only "Error" in gradio 6)."""

from __future__ import annotations

import json
import secrets
import tempfile
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from app.errors import Refused
from app.extraction.fields import (
    COLUMN_COLUMNS,
    COLUMN_TYPES,
    TABLE_COLUMNS,
    TABLE_TYPES,
    column_rows,
    field_rows,
    schema_from_fields,
)
from app.extraction.json_schema import TABLE, SchemaProblem, is_table
from app.extraction.service import ExtractionService
from app.extraction.store import Run
from app.ui.callers import UNKNOWN_PAGE, Owners
from app.ui.errors import explained, refused
from app.ui.extraction_fields import editing, with_column_rows
from app.ui.extraction_review import flat_grid, review, table_grid, widths
from app.ui.wiring import OnLoad

_EVERY_S = 1.0
_CUSTOM = "custom"
_FIELD_COLUMNS = list(TABLE_COLUMNS)
_OVER = ("done", "stopped", "error")
_QUEUED: dict[str, Any] = {"api_visibility": "private", "show_progress": "hidden"}
_EMPTY = "_No results yet: choose a template and documents, then **Extract**; earlier runs are under **Runs**._"
# only for steps that cannot fail
_QUIET: dict[str, Any] = {"api_visibility": "private", "queue": False, "show_progress": "hidden"}


def build(ex: ExtractionService, owners: Owners) -> tuple[gr.Timer, OnLoad]:
    """Returns the tab's timer (progress and results refresh only while the tab is shown) and its refresh
    of the documents and runs to choose from (the page runs it when the tab is shown)."""
    templates = ex.templates()
    browser = gr.BrowserState(None, storage_key="quartet-runs")  # a random id: whose runs these are
    with gr.Row():
        template = gr.Dropdown(
            [(t.title, name) for name, t in templates.items()] + [("Custom schema…", _CUSTOM)],
            value=next(iter(templates), _CUSTOM),
            label="Template",
            elem_id="extract-template",
            scale=2,
        )
        documents = gr.Dropdown(label="Documents", multiselect=True, choices=[], elem_id="extract-docs", scale=3)
        folder = gr.Dropdown(label="…or a kb/ folder", choices=[], elem_id="extract-folder", scale=2)
    with gr.Accordion("Custom schema", open=False, elem_id="custom-schema") as custom_box:
        schema_text = gr.Code(
            language="json", label="JSON Schema (an object of fields and tables)", elem_id="schema-text"
        )
        fields = gr.Dataframe(
            headers=_FIELD_COLUMNS,
            column_count=5,
            row_count=3,
            interactive=True,
            label="…or a field table (type: text, number, integer, yes/no, date, list of text, table)",
            elem_id="field-table",
        )
        typed = editing(fields, types=list(TABLE_TYPES), type_column=1, what="field", elem_prefix="field")
        table_columns = gr.Dataframe(
            headers=list(COLUMN_COLUMNS),
            column_count=6,
            row_count=2,
            interactive=True,
            elem_id="column-table",
            label="…and the columns of each table field (its name first)",
        )
        editing(table_columns, types=COLUMN_TYPES, type_column=2, what="column", elem_prefix="column")
        with gr.Row():
            from_template = gr.Button("Start from the template", elem_id="from-template")
            to_schema = gr.Button("Make the schema from the table", elem_id="to-schema")
    # which schema Extract runs, said where Extract is: a pasted schema was silently dropped while a template
    # was still chosen; pasting one now chooses "Custom schema…", and choosing that opens its editor
    runs_what = gr.Markdown(_runs_what(template.value, templates), elem_id="extract-which")
    with gr.Row():
        run = gr.Button("Extract", variant="primary", elem_id="extract-run")
        stop = gr.Button("Stop", elem_id="extract-stop")
        runs = gr.Dropdown(label="Runs", choices=[], elem_id="extract-runs", scale=3)
    progress = gr.Markdown(elem_id="extract-progress")
    # no grid until there are results (an empty grid shows headers "1 2 3"): a line that says what to do
    empty = gr.Markdown(_EMPTY, elem_id="extract-empty")
    table = gr.Dataframe(
        visible=False,
        interactive=True,
        wrap=True,
        label=(
            "Results (edit a cell to correct it; ✓ found on its page, ? not found there, ⚠ conflict, ✎ corrected, "
            "– nothing found)"
        ),
        elem_id="extract-results",
    )
    view = gr.HTML(elem_id="extract-review")
    with gr.Row():
        # shown once a result has tables (an empty dropdown and file box stood there before any result)
        table_name = gr.Dropdown(label="Table", choices=[], visible=False, elem_id="extract-table-name", scale=1)
    rows_grid = gr.Dataframe(
        visible=False,
        interactive=True,
        wrap=True,
        label="Rows of the table (edit a cell to correct it)",
        elem_id="extract-table-rows",
    )
    with gr.Row():
        csv_file = gr.DownloadButton("Export CSV", elem_id="export-csv", interactive=False)
        json_file = gr.DownloadButton("Export JSON", elem_id="export-json", interactive=False)
        table_files = gr.File(
            label="Tables as CSV (one file per table)",
            file_count="multiple",
            elem_id="export-tables",
            interactive=False,
            visible=False,
        )
    shown = gr.State(None)  # (run id, documents done, status, corrections) of what the table shows

    def choices(browser_id: str | None, request: gr.Request) -> tuple[Any, ...]:
        browser_id = browser_id or secrets.token_urlsafe(18)
        docs = ex.documents()
        folders = sorted({d.collection for d in docs if d.collection})
        return (
            browser_id,
            gr.update(choices=[(d.name, d.id) for d in docs]),
            gr.update(choices=folders),
            gr.update(choices=_run_choices(ex.runs(owner=owners.page_owner(request, browser_id)))),
        )

    @explained
    def on_run(
        name: str, ids: list[int] | None, where: str | None, pasted: str, browser_id: str | None, request: gr.Request
    ) -> tuple[Any, ...]:
        if name == _CUSTOM and not (pasted or "").strip():
            raise SchemaProblem("paste a JSON Schema, or make one from the field table")
        chosen, schema = ex.schema_for(name, pasted if name == _CUSTOM else None)
        owner = owners.page_owner(request, browser_id)
        if owner == UNKNOWN_PAGE:  # its load has not answered yet: the run would be nobody's (or everyone's)
            raise Refused("the page is still loading: press Extract again in a moment")
        run_id = ex.start_run(ex.documents_for(ids or [], where), template=chosen, schema=schema, owner=owner)
        return gr.update(choices=_run_choices(ex.runs(owner=owner)), value=run_id), None

    def refresh(run_id: int | None, before: Any, browser_id: str | None, request: gr.Request) -> tuple[Any, ...]:
        keep, owner = gr.update(), owners.page_owner(request, browser_id)
        try:
            found, results = (ex.run(run_id, owner=owner), ex.results(run_id, owner=owner)) if run_id else (None, [])
        except LookupError:
            found, results = None, []
        if found is None:
            hidden = gr.update(visible=False)
            return "", hidden, gr.update(visible=True), keep, keep, keep, hidden, hidden, hidden, before
        now = (found.id, found.documents_done, found.status, tuple(json.dumps(r.corrected) for r in results))
        line = _progress(found, ex.live(found.id))
        if now == before:
            return line, keep, keep, keep, keep, keep, keep, keep, keep, before
        ready = bool(results) and found.status in _OVER  # export once, when it is over
        files = _exports(ex, found.id, owner) if ready else (None, None, [])
        tables = [name for name, spec in found.schema["properties"].items() if is_table(spec)]
        first = tables[0] if tables else None
        flat = flat_grid(found, results)
        return (
            line,
            gr.update(value=flat, column_widths=widths(flat["headers"]), visible=bool(results)),
            gr.update(visible=not results),
            review(found, results),
            gr.update(value=files[0], interactive=ready),
            gr.update(value=files[1], interactive=ready),
            gr.update(value=files[2] or None, visible=bool(files[2])),
            gr.update(choices=tables, value=first, visible=bool(tables) and bool(results)),
            on_table(found.id, first, browser_id, request),
            now,
        )

    @explained
    def on_edit(
        run_id: int | None, edited: pd.DataFrame, last: str | None, browser_id: str | None, request: gr.Request
    ) -> tuple[None, str | None]:
        """`shown` emptied: the next tick redraws, with the corrections or (one refused) as stored. A cell's
        edit fires `input` twice (its Enter, then its blur): the edit just refused is not refused again."""
        rows = _texts(edited)
        key = json.dumps([run_id, rows])
        owner = owners.page_owner(request, browser_id)
        if run_id and key != last and refused(lambda: ex.correct_cells(run_id, rows, owner=owner)):
            return None, key
        return None, key if key == last else None

    def on_table(run_id: int | None, name: str | None, browser_id: str | None, request: gr.Request) -> Any:
        owner = owners.page_owner(request, browser_id)
        try:
            found = ex.run(run_id, owner=owner) if run_id else None
        except LookupError:
            found = None
        if found is None or not name or not is_table(found.schema["properties"].get(name, {})):
            return gr.update(value=pd.DataFrame(), visible=False)
        grid = table_grid(found, name, ex.table_rows(found.id, name, owner=owner))
        return gr.update(value=grid, column_widths=widths(grid["headers"]), visible=True)

    @explained
    def on_table_edit(
        run_id: int | None, name: str | None, edited: pd.DataFrame, browser_id: str | None, request: gr.Request
    ) -> Any:
        owner = owners.page_owner(request, browser_id)
        rows = _texts(edited)
        if run_id and name and refused(lambda: ex.correct_table_cells(run_id, name, rows, owner=owner)):
            return on_table(run_id, name, browser_id, request)  # the grid as stored again
        return gr.skip()

    @explained
    def on_stop(run_id: int | None, browser_id: str | None, request: gr.Request) -> None:
        if run_id:
            ex.stop_run(run_id, owner=owners.page_owner(request, browser_id))

    def on_from_template(name: str) -> tuple[Any, Any]:
        found = ex.templates().get(name)
        schema = found.schema if found else {}
        return (
            pd.DataFrame(field_rows(schema), columns=_FIELD_COLUMNS),
            pd.DataFrame(column_rows(schema), columns=list(COLUMN_COLUMNS)),
        )

    @explained
    def on_to_schema(rows: pd.DataFrame, cols: pd.DataFrame) -> tuple[str, Any]:
        schema = schema_from_fields(rows.fillna("").values.tolist(), column_rows=cols.fillna("").values.tolist())
        return json.dumps(schema, indent=2, ensure_ascii=False), _CUSTOM

    outputs = [progress, table, empty, view, csv_file, json_file, table_files, table_name, rows_grid, shown]
    run.click(on_run, [template, documents, folder, schema_text, browser], [runs, shown], **_QUEUED)
    stop.click(on_stop, [runs, browser], None, **_QUEUED)

    def on_runs(run_id: int | None, browser_id: str | None, request: gr.Request) -> tuple[Any, ...]:
        return refresh(run_id, None, browser_id, request)  # (a lambda's `request` is not annotated: it got None)

    runs.change(on_runs, [runs, browser], outputs, **_QUIET)
    refusal = gr.State(None)  # the grid's last edit refused (to say it once)
    table.input(on_edit, [runs, table, refusal, browser], [shown, refusal], **_QUEUED)
    table_name.change(on_table, [runs, table_name, browser], rows_grid, **_QUIET)
    rows_grid.input(on_table_edit, [runs, table_name, rows_grid, browser], rows_grid, **_QUEUED)
    from_template.click(on_from_template, template, [fields, table_columns], **_QUIET)
    to_schema.click(on_to_schema, [fields, table_columns], [schema_text, template], **_QUEUED)
    typed.then(
        lambda rows, cols: with_column_rows(rows, cols, table=TABLE, type_column=1),
        [fields, table_columns],
        table_columns,
        **_QUEUED,
    )  # a field made a table gets a first column to fill in
    template.change(
        lambda name: (_runs_what(name, ex.templates()), gr.update(open=True) if name == _CUSTOM else gr.update()),
        template,
        [runs_what, custom_box],
        **_QUIET,
    )
    schema_text.input(lambda text: _CUSTOM if (text or "").strip() else gr.update(), schema_text, template, **_QUIET)
    timer = gr.Timer(_EVERY_S, active=False)
    timer.tick(refresh, [runs, shown, browser], outputs, **_QUIET)
    timer.tick(choices, browser, [browser, documents, folder, runs], **_QUIET)
    return timer, OnLoad(choices, [browser], [browser, documents, folder, runs])


def _runs_what(name: str | None, templates: dict[str, Any]) -> str:
    if name == _CUSTOM or name not in templates:
        return "Extract runs **your custom schema** (below, under Custom schema)."
    return f"Extract runs the **{templates[name].title}** template; a schema pasted below is not used with it."


def _texts(edited: pd.DataFrame) -> list[dict[str, str]]:
    return [{str(k): v for k, v in row.items()} for row in edited.fillna("").astype(str).to_dict("records")]


def _run_choices(runs: list[Run]) -> list[tuple[str, int]]:
    return [(f"#{r.id} {r.title} — {r.status} ({r.created_at[:16].replace('T', ' ')})", r.id) for r in runs]


def _progress(run: Run, live: str) -> str:
    line = f"**{run.title}**: {run.documents_done} of {run.documents_total} documents — {run.status}"
    if run.status == "stopped" and not run.documents_done:
        line = f"**{run.title}** — stopped by the user before any document"
    elif run.status == "stopped":
        line += " by the user before the end" if run.documents_done < run.documents_total else " by the user"
    elif run.error:
        line += f" — ⚠ {run.error}"
    return line + (f"  \n_{live}_" if live and run.status in ("queued", "running") else "")


def _exports(ex: ExtractionService, run_id: int, owner: str) -> tuple[str, str, list[str]]:
    csv_path, json_path, tables = ex.export(run_id, owner=owner).write(Path(tempfile.gettempdir()) / "quartet-exports")
    return str(csv_path), str(json_path), [str(p) for p in tables]
