"""The Extraction tab: a template (or custom schema) over documents, results as a table to review and
correct, each value with its page and whether that page really says it; each table of the schema as
a grid under its record, and as an editable grid of all documents' rows; CSV (one per table) and JSON."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from app.context import AppContext
from app.extraction.cells import cell_text
from app.extraction.fields import COLUMN_COLUMNS, column_rows, field_rows, schema_from_fields
from app.extraction.schemas import SchemaProblem, columns, is_table
from app.extraction.store import Result, Run
from app.ui.extraction_review import review as _review

_EVERY_S = 1.0
_CUSTOM = "custom"
_FIELD_COLUMNS = ["name", "type", "description", "required", "allowed values"]


def build(ctx: AppContext) -> gr.Timer:
    """Returns the tab's timer (progress and results refresh only while the tab is shown)."""
    ex = ctx.extraction
    templates = ex.templates()
    with gr.Row():
        template = gr.Dropdown(
            [(t.title, name) for name, t in templates.items()] + [("Custom schema…", _CUSTOM)],
            value=next(iter(templates), _CUSTOM), label="Template", elem_id="extract-template", scale=2,
        )
        documents = gr.Dropdown(label="Documents", multiselect=True, choices=[], elem_id="extract-docs", scale=3)
        folder = gr.Dropdown(label="…or a kb/ folder", choices=[], elem_id="extract-folder", scale=2)
    with gr.Accordion("Custom schema", open=False, elem_id="custom-schema"):
        schema_text = gr.Code(language="json", label="JSON Schema (an object of fields and tables)",
                              elem_id="schema-text")
        fields = gr.Dataframe(headers=_FIELD_COLUMNS, column_count=5, column_limits=(5, 5), row_count=3,
                              interactive=True, label="…or a field table (type: text, number, integer, yes/no, "
                              "date, list of text, table)", elem_id="field-table")
        table_columns = gr.Dataframe(headers=list(COLUMN_COLUMNS), column_count=6, column_limits=(6, 6),
                                     row_count=2, interactive=True, elem_id="column-table",
                                     label="…and the columns of each table field (its name first)")
        with gr.Row():
            from_template = gr.Button("Start from the template", elem_id="from-template")
            to_schema = gr.Button("Make the schema from the table", elem_id="to-schema")
    with gr.Row():
        run = gr.Button("Extract", variant="primary", elem_id="extract-run")
        stop = gr.Button("Stop", elem_id="extract-stop")
        runs = gr.Dropdown(label="Runs", choices=[], elem_id="extract-runs", scale=3)
    progress = gr.Markdown(elem_id="extract-progress")
    table = gr.Dataframe(interactive=True, wrap=True, label="Results (edit a cell to correct it)",
                         elem_id="extract-results")
    review = gr.HTML(elem_id="extract-review")
    with gr.Row():
        table_name = gr.Dropdown(label="Table", choices=[], elem_id="extract-table-name", scale=1)
    table_grid = gr.Dataframe(interactive=True, wrap=True, label="Rows of the table (edit a cell to correct it)",
                              elem_id="extract-table-rows")
    with gr.Row():
        csv_file = gr.DownloadButton("Export CSV", elem_id="export-csv", interactive=False)
        json_file = gr.DownloadButton("Export JSON", elem_id="export-json", interactive=False)
        table_files = gr.File(label="Tables as CSV (one file per table)", file_count="multiple",
                              elem_id="export-tables", interactive=False)
    shown = gr.State(None)  # (run id, documents done, status, corrections) of what the table shows

    def choices() -> tuple[Any, ...]:
        docs = [d for d in ctx.knowledge.documents() if d.status == "ok"]
        folders = sorted({d.collection for d in docs if d.collection})
        return (gr.update(choices=[(d.name, d.id) for d in docs]), gr.update(choices=folders),
                gr.update(choices=_run_choices(ex.store.runs())))

    def on_run(name: str, ids: list[int] | None, where: str | None, pasted: str) -> tuple[Any, ...]:
        try:
            chosen, schema = ex.schema_for(name, pasted if name == _CUSTOM else None)
            if name == _CUSTOM and not (pasted or "").strip():
                raise SchemaProblem("paste a JSON Schema, or make one from the field table")
            run_id = ex.start_run(ex.documents_for(ids or [], where), template=chosen, schema=schema)
        except (SchemaProblem, ValueError) as err:
            raise gr.Error(str(err)) from err
        return gr.update(choices=_run_choices(ex.store.runs()), value=run_id), None

    def refresh(run_id: int | None, before: Any) -> tuple[Any, ...]:
        run = ex.store.run(run_id) if run_id else None
        keep = gr.update()
        if run is None:
            return "", keep, keep, keep, keep, keep, keep, keep, before
        results = ex.store.results(run.id)
        now = (run.id, run.documents_done, run.status, tuple(json.dumps(r.corrected) for r in results))
        line = _progress(run, ex.live(run.id))
        if now == before:
            return line, keep, keep, keep, keep, keep, keep, keep, before
        ready = bool(results) and run.status not in ("queued", "running")  # export once, when it is over
        files = _exports(ctx, run) if ready else (None, None, [])
        tables = [name for name, spec in run.schema["properties"].items() if is_table(spec)]
        return (line, _table(run, results), _review(run, results), gr.update(value=files[0], interactive=ready),
                gr.update(value=files[1], interactive=ready), files[2] or None,
                gr.update(choices=tables, value=tables[0] if tables else None),
                on_table(run.id, tables[0] if tables else None), now)

    def on_edit(run_id: int | None, edited: pd.DataFrame) -> None:
        if run_id:
            try:
                ex.correct_cells(run_id, edited.fillna("").astype(str).to_dict("records"))
            except ValueError as err:
                raise gr.Error(str(err)) from err
        # the next tick redraws with the corrections

    def on_table(run_id: int | None, name: str | None) -> Any:
        run = ex.store.run(run_id) if run_id else None
        if run is None or not name or not is_table(run.schema["properties"].get(name, {})):
            return pd.DataFrame()
        cols = list(columns(run.schema["properties"][name]))
        rows = [[r.document_name, i + 1, *(cell_text(row.get(c)) for c in cols)] for r, i, row in
                ex.table_rows(run.id, name)]
        return pd.DataFrame(rows, columns=["document", "row", *cols])

    def on_table_edit(run_id: int | None, name: str | None, edited: pd.DataFrame) -> None:
        if run_id and name:
            try:
                ex.correct_table_cells(run_id, name, edited.fillna("").astype(str).to_dict("records"))
            except (ValueError, LookupError) as err:
                raise gr.Error(str(err)) from err

    def on_from_template(name: str) -> tuple[Any, Any]:
        found = ex.templates().get(name)
        schema = found.schema if found else {}
        return (pd.DataFrame(field_rows(schema), columns=_FIELD_COLUMNS),
                pd.DataFrame(column_rows(schema), columns=list(COLUMN_COLUMNS)))

    def on_to_schema(rows: pd.DataFrame, cols: pd.DataFrame) -> tuple[str, Any]:
        try:
            schema = schema_from_fields(rows.fillna("").values.tolist(), column_rows=cols.fillna("").values.tolist())
        except SchemaProblem as err:
            raise gr.Error(str(err)) from err
        return json.dumps(schema, indent=2, ensure_ascii=False), _CUSTOM

    private: dict[str, Any] = {"api_visibility": "private"}
    outputs = [progress, table, review, csv_file, json_file, table_files, table_name, table_grid, shown]
    run.click(on_run, [template, documents, folder, schema_text], [runs, shown], show_progress="hidden", **private)
    stop.click(lambda run_id: ex.stop_run(run_id) if run_id else None, runs, None, queue=False, **private)
    runs.change(lambda run_id: refresh(run_id, None), runs, outputs, queue=False, **private)
    table.input(on_edit, [runs, table], shown, **private)
    table_name.change(on_table, [runs, table_name], table_grid, queue=False, **private)
    table_grid.input(on_table_edit, [runs, table_name, table_grid], None, **private)
    from_template.click(on_from_template, template, [fields, table_columns], queue=False, **private)
    to_schema.click(on_to_schema, [fields, table_columns], [schema_text, template], queue=False, **private)
    timer = gr.Timer(_EVERY_S, active=False)
    timer.tick(refresh, [runs, shown], outputs, queue=False, **private)
    timer.tick(choices, None, [documents, folder, runs], queue=False, **private)
    return timer


def _run_choices(runs: list[Run]) -> list[tuple[str, int]]:
    return [(f"#{r.id} {r.title} — {r.status} ({r.created_at[:16].replace('T', ' ')})", r.id) for r in runs]


def _progress(run: Run, live: str) -> str:
    line = f"**{run.title}**: {run.documents_done} of {run.documents_total} documents — {run.status}"
    if run.error:
        line += f" — ⚠ {run.error}"
    return line + (f"  \n_{live}_" if live and run.status in ("queued", "running") else "")


def _table(run: Run, results: list[Result]) -> pd.DataFrame:
    names = [n for n, spec in run.schema["properties"].items() if not is_table(spec)]
    rows = [[r.document_name, *(cell_text(r.final.get(n)) for n in names)] for r in results]
    return pd.DataFrame(rows, columns=["document", *names])


def _exports(ctx: AppContext, run: Run) -> tuple[str, str, list[str]]:
    folder = Path(tempfile.gettempdir()) / "quartet-exports"
    folder.mkdir(exist_ok=True)
    stem = f"extraction-{run.id}-{run.template}"
    csv_path, json_path = folder / f"{stem}.csv", folder / f"{stem}.json"
    csv_path.write_text(ctx.extraction.store.export_csv(run.id), encoding="utf-8")
    json_path.write_text(ctx.extraction.store.export_json(run.id), encoding="utf-8")
    tables = []
    for name, spec in run.schema["properties"].items():
        if is_table(spec):
            path = folder / f"{stem}-{name}.csv"
            path.write_text(ctx.extraction.store.export_table_csv(run.id, name), encoding="utf-8")
            tables.append(str(path))
    return str(csv_path), str(json_path), tables
