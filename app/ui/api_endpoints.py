"""The extraction feature's named endpoints for gradio_client (extract, extraction_run,
extraction_results). The other features register their own beside their tabs: chat_api.py,
documents_api.py, cards_api.py, admin_api.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gradio as gr

from app.context import AppContext
from app.extraction.extractor import ExtractionFailed, Limits
from app.extraction.merge import provenance
from app.extraction.schemas import SchemaProblem
from app.ui.wiring import ENGINE_LISTENERS, ENGINE_QUEUE


def register(ctx: AppContext) -> None:
    def extract(
        document: str, template: str = "", schema: str = "", max_tokens: int = 0, timeout_s: float = 0
    ) -> Iterator[dict[str, Any]]:
        """Typed fields from one document (id or file name) by a template name or a pasted JSON Schema:
        yields {"progress": ...} while it works, then {"document", "record", "fields"} where each field
        has its page, snippet, verified flag (None: not checkable) and any conflicting candidates.
        max_tokens / timeout_s (per answer) may lower the appliance's limits, never raise them."""
        try:
            doc = ctx.extraction.find_document(document)
            _, checked = ctx.extraction.schema_for(template, schema or None)
            limits = ctx.extraction.extractor.limits
            lower = Limits(max_tokens or limits.max_tokens, timeout_s or limits.timeout_s)
            steps = ctx.extraction.extractor.run(doc.id, checked, limits=lower)
            while True:
                step = next(steps)
                yield {"progress": step.text, "waiting": step.waiting}
        except StopIteration as finished:
            result = finished.value
            yield {"document": result.name, "record": result.record, "problems": result.problems,
                   "fields": {name: {"value": fv.value, **provenance(fv)} for name, fv in result.fields.items()}}
        except (SchemaProblem, ValueError, ExtractionFailed) as err:
            raise gr.Error(str(err)) from err

    def extraction_run(documents: list[str], folder: str = "", template: str = "", schema: str = "") -> int:
        """Start a batch in the background: a template (or schema) over documents (ids or file names)
        and/or every document of a kb/ folder. Returns the run id for `extraction_results`."""
        try:
            ids = [ctx.extraction.find_document(d).id for d in documents or []]
            name, checked = ctx.extraction.schema_for(template, schema or None)
            return ctx.extraction.start_run(ctx.extraction.documents_for(ids, folder or None), template=name,
                                            schema=checked)
        except (SchemaProblem, ValueError) as err:
            raise gr.Error(str(err)) from err

    def extraction_results(run_id: int) -> dict[str, Any]:
        """A batch's state and its results so far (corrections applied), with the CSV export."""
        run = ctx.extraction.store.run(run_id)
        if run is None:
            raise gr.Error(f"there is no extraction run {run_id}")
        results = ctx.extraction.store.results(run_id)
        return {"status": run.status, "error": run.error, "documents_done": run.documents_done,
                "documents_total": run.documents_total, "now": ctx.extraction.live(run_id),
                "results": [{"document": r.document_name, "record": r.final, "fields": r.fields,
                             "unverified": r.unverified, "error": r.error} for r in results],
                "csv": ctx.extraction.store.export_csv(run_id) if results else ""}

    gr.api(extract, api_name="extract", concurrency_limit=ENGINE_LISTENERS, concurrency_id=ENGINE_QUEUE)
    gr.api(extraction_run, api_name="extraction_run", queue=False)
    gr.api(extraction_results, api_name="extraction_results", queue=False)

