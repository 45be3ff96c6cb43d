"""The Extraction tab: a template (or custom schema) over documents, results as a table to review and
correct, each value with its page and whether that page really says it; CSV and JSON export."""

from __future__ import annotations

import html
import json
import tempfile
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from app.context import AppContext
from app.extraction.cells import cell_text
from app.extraction.fields import field_rows, schema_from_fields
from app.extraction.schemas import SchemaProblem
from app.extraction.store import Result, Run

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
        schema_text = gr.Code(language="json", label="JSON Schema (an object of flat fields)", elem_id="schema-text")
        fields = gr.Dataframe(headers=_FIELD_COLUMNS, column_count=5, column_limits=(5, 5), row_count=3,
                              interactive=True, label="…or a field table", elem_id="field-table")
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
        csv_file = gr.DownloadButton("Export CSV", elem_id="export-csv", interactive=False)
        json_file = gr.DownloadButton("Export JSON", elem_id="export-json", interactive=False)
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
        if run is None:
            return "", gr.update(), gr.update(), gr.update(), gr.update(), before
        results = ex.store.results(run.id)
        now = (run.id, run.documents_done, run.status, tuple(json.dumps(r.corrected) for r in results))
        line = _progress(run, ex.live(run.id))
        if now == before:
            return line, gr.update(), gr.update(), gr.update(), gr.update(), before
        ready = bool(results) and run.status not in ("queued", "running")  # export once, when it is over
        files = _exports(ctx, run) if ready else (None, None)
        return (line, _table(run, results), _review(run, results), gr.update(value=files[0], interactive=ready),
                gr.update(value=files[1], interactive=ready), now)

    def on_edit(run_id: int | None, edited: pd.DataFrame) -> None:
        if run_id:
            try:
                ex.correct_cells(run_id, edited.fillna("").astype(str).to_dict("records"))
            except ValueError as err:
                raise gr.Error(str(err)) from err
        # the next tick redraws with the corrections

    def on_from_template(name: str) -> Any:
        found = ex.templates().get(name)
        return pd.DataFrame(field_rows(found.schema) if found else [], columns=_FIELD_COLUMNS)

    def on_to_schema(rows: pd.DataFrame) -> tuple[str, Any]:
        try:
            schema = schema_from_fields(rows.fillna("").values.tolist())
        except SchemaProblem as err:
            raise gr.Error(str(err)) from err
        return json.dumps(schema, indent=2, ensure_ascii=False), _CUSTOM

    private: dict[str, Any] = {"api_visibility": "private"}
    outputs = [progress, table, review, csv_file, json_file, shown]
    run.click(on_run, [template, documents, folder, schema_text], [runs, shown], show_progress="hidden", **private)
    stop.click(lambda run_id: ex.stop_run(run_id) if run_id else None, runs, None, queue=False, **private)
    runs.change(lambda run_id: refresh(run_id, None), runs, outputs, queue=False, **private)
    table.input(on_edit, [runs, table], shown, **private)
    from_template.click(on_from_template, template, fields, queue=False, **private)
    to_schema.click(on_to_schema, fields, [schema_text, template], queue=False, **private)
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
    names = list(run.schema["properties"])
    rows = [[r.document_name, *(cell_text(r.final.get(n)) for n in names)] for r in results]
    return pd.DataFrame(rows, columns=["document", *names])


def _review(run: Run, results: list[Result]) -> str:
    parts = []
    for result in results:
        items = []
        for name in run.schema["properties"]:
            info, value = result.fields.get(name), result.final.get(name)
            if value is None:
                continue
            if name in result.corrected:
                badge = "<span class='q-ok'>corrected</span>"
            elif info and info.get("conflict"):
                others = "; ".join(f"{cell_text(c['value'])} (p. {c['page']})" for c in info.get("conflicts", []))
                badge = f"<span class='q-warn'>conflict: {html.escape(others)}</span>"
            elif info and info.get("verified") is False:
                badge = "<span class='q-warn'>unverified: not found on its page</span>"
            elif info and info.get("verified") is None:
                badge = "<span class='q-muted'>cannot be checked in the text</span>"
            else:
                badge = "<span class='q-ok'>found on the page</span>"
            page = f"p. {info['page']}" if info and info.get("page") else ""
            snippet = html.escape((info or {}).get("snippet") or "")
            items.append(f"<li><b>{html.escape(name)}</b>: {html.escape(cell_text(value))} <i>{page}</i> {badge}"
                         f"{f'<div class=q-snippet>{snippet}</div>' if snippet else ''}</li>")
        error = f"<div class='q-warn'>⚠ {html.escape(result.error)}</div>" if result.error else ""
        parts.append(f"<details class='q-review' open><summary>{html.escape(result.document_name)}</summary>"
                     f"{error}<ul>{''.join(items)}</ul></details>")
    return "".join(parts)


def _exports(ctx: AppContext, run: Run) -> tuple[str, str]:
    folder = Path(tempfile.gettempdir()) / "quartet-exports"
    folder.mkdir(exist_ok=True)
    stem = f"extraction-{run.id}-{run.template}"
    csv_path, json_path = folder / f"{stem}.csv", folder / f"{stem}.json"
    csv_path.write_text(ctx.extraction.store.export_csv(run.id), encoding="utf-8")
    json_path.write_text(ctx.extraction.store.export_json(run.id), encoding="utf-8")
    return str(csv_path), str(json_path)
