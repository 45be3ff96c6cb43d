"""The extraction feature's named endpoints (gradio_client): extract (one document, or a file uploaded
in the same call), extraction_run and extraction_results (a batch in the background).

`extract` takes its file through a real (hidden) File component, so the file is checked as every upload
of the page is: Gradio accepts only a file that was uploaded to it (never a server path a client names:
the page is marked as launched in `server._mount`), then it is saved into kb/ like a Documents upload."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gradio as gr

from app.errors import Refused
from app.extraction.extractor import Extraction, Step
from app.extraction.merge import provenance
from app.extraction.service import ExtractionService
from app.ui.callers import Owners
from app.ui.errors import explained
from app.ui.wiring import ENGINE_LISTENERS, ENGINE_QUEUE


def register(ex: ExtractionService, owners: Owners) -> None:
    @explained
    def extract(
        document: str = "",
        template: str = "",
        schema: str = "",
        max_tokens: int = 0,
        timeout_s: float = 0,
        file: str | None = None,
        request: gr.Request = None,  # type: ignore[assignment]
    ) -> Iterator[dict[str, Any]]:
        """Typed fields from one document (id or file name), or from `file`, uploaded in this call (saved
        into kb/ and indexed like any upload), by a template name or a pasted JSON Schema: yields
        {"progress", "waiting"} while it works, then {"document", "record", "problems", "fields"} where each
        field has its page, snippet, verified flag (None: not checkable) and any conflicting candidates.
        max_tokens / timeout_s (per answer) may lower the appliance's limits, never raise them."""
        _, checked = ex.schema_for(template, schema or None)
        tokens, seconds = int(max_tokens or 0), float(timeout_s or 0)
        if file:
            owner = owners.owner_of(request)
            updates = ex.extract_file(Path(file), checked, max_tokens=tokens, timeout_s=seconds, owner=owner)
        elif str(document or "").strip():
            updates = ex.extract_one(ex.find_document(document).id, checked, max_tokens=tokens, timeout_s=seconds)
        else:
            raise Refused("name a document (its id or file name), or send a file to extract from")
        for update in updates:
            yield _step(update) if isinstance(update, Step) else _result(update)

    @explained
    def extraction_run(
        documents: list[str],
        folder: str = "",
        template: str = "",
        schema: str = "",
        request: gr.Request = None,  # type: ignore[assignment]
    ) -> int:
        """Start a batch in the background: a template (or schema) over documents (ids or file names)
        and/or every document of a kb/ folder. Returns the run id for `extraction_results`; the run is
        the caller's (docs/api.md: how a client keeps its identity)."""
        ids = [ex.find_document(d).id for d in documents or []]
        name, checked = ex.schema_for(template, schema or None)
        owner = owners.owner_of(request)
        return ex.start_run(ex.documents_for(ids, folder or None), template=name, schema=checked, owner=owner)

    @explained
    def extraction_results(run_id: int, request: gr.Request = None) -> dict[str, Any]:  # type: ignore[assignment]
        """One of the caller's batches: its state and its results so far (corrections applied), with the
        CSV export."""
        owner = owners.owner_of(request)
        run, results = ex.run(run_id, owner=owner), ex.results(run_id, owner=owner)
        return {
            "status": run.status,
            "error": run.error,
            "documents_done": run.documents_done,
            "documents_total": run.documents_total,
            "now": ex.live(run_id),
            "results": [
                {
                    "document": r.document_name,
                    "record": r.final,
                    "fields": r.fields,
                    "unverified": r.unverified,
                    "error": r.error,
                }
                for r in results
            ],
            "csv": ex.export(run_id, owner=owner).csv if results else "",
        }

    with gr.Group(visible=False):  # the inputs of `extract`: an API, not a part of the page
        inputs = [
            gr.Textbox(""),
            gr.Textbox(""),
            gr.Textbox(""),
            gr.Number(0, precision=0),
            gr.Number(0),
            gr.File(file_count="single", type="filepath"),
        ]
        output = gr.JSON()
        trigger = gr.Button()
    trigger.click(
        extract,
        inputs,
        output,
        api_name="extract",
        concurrency_limit=ENGINE_LISTENERS,
        concurrency_id=ENGINE_QUEUE,
        show_progress="hidden",
    )
    gr.api(extraction_run, api_name="extraction_run", queue=False)
    gr.api(extraction_results, api_name="extraction_results", queue=False)


def _step(step: Step) -> dict[str, Any]:
    return {"progress": step.text, "waiting": step.waiting}


def _result(result: Extraction) -> dict[str, Any]:
    return {
        "document": result.name,
        "record": result.record,
        "problems": result.problems,
        "constrained": result.constrained,
        "fields": {name: {"value": fv.value, **provenance(fv)} for name, fv in result.fields.items()},
    }
