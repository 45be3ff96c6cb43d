"""Named endpoints for gradio_client: cards, status; documents, ask, summarize; extraction; admin.
(The chat feature registers its own, in chat_api.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gradio as gr

from app.admin import AdminDenied
from app.context import AppContext
from app.engine.events import EngineError
from app.extraction.extractor import ExtractionFailed, Limits
from app.extraction.merge import provenance
from app.extraction.schemas import SchemaProblem
from app.ui.callers import client_address
from app.ui.wiring import ENGINE_LISTENERS, ENGINE_QUEUE


def register(ctx: AppContext) -> None:
    def status() -> dict[str, Any]:
        """The loaded model and its layer count, the queue, and each card's state and layers."""
        return ctx.status()

    def cards() -> list[dict[str, Any]]:
        """The latest sample of every card: state, load, temperature (None = no sensor), memory, layers, tok/s."""
        return [{k: v for k, v in card.items() if k != "health"} for card in ctx.status()["cards"]]

    def admin_login(password: str, request: gr.Request = None) -> str:  # type: ignore[assignment]
        """Open an admin session; returns the token that admin endpoints need."""
        try:
            return ctx.admin.login(password, who=_owner(request), client=client_address(request))
        except AdminDenied as err:
            raise gr.Error(str(err)) from err

    def switch_model(model_id: str, admin_token: str, request: gr.Request = None) -> dict[str, Any]:  # type: ignore[assignment]
        """Admin only: switch to a catalog model; the old one is unloaded first, and comes back on failure."""
        try:
            info = ctx.admin.switch_model(admin_token, model_id, who=_owner(request))
        except (AdminDenied, EngineError) as err:
            raise gr.Error(str(err)) from err
        return {"model": info.name, "n_ctx": info.n_ctx, "load_s": round(info.load_s, 2)}

    def ping_cards(endpoints: list[str], admin_token: str) -> list[dict[str, Any]]:
        """Admin only: each endpoint's RPC port and health endpoint, changing nothing."""
        try:
            return ctx.admin.ping(admin_token, endpoints)
        except (AdminDenied, EngineError) as err:
            raise gr.Error(str(err)) from err

    def set_cards(endpoints: list[str], admin_token: str, request: gr.Request = None) -> dict[str, Any]:  # type: ignore[assignment]
        """Admin only: run the model on these card endpoints (N ≥ 1); every one must answer first."""
        try:
            info = ctx.admin.set_cards(admin_token, endpoints, who=_owner(request))
        except (AdminDenied, EngineError) as err:
            raise gr.Error(str(err)) from err
        return {"model": info.name, "cards": [c.endpoint for c in info.cards], "load_s": round(info.load_s, 2)}

    def engine_settings(changes: dict[str, Any], admin_token: str, request: gr.Request = None) -> dict[str, Any]:  # type: ignore[assignment]
        """Admin only: change n_ctx, n_threads, n_batch, n_ubatch, kv_type or tensor_split and reload."""
        try:
            info = ctx.admin.apply_settings(admin_token, dict(changes), who=_owner(request))
        except (AdminDenied, EngineError) as err:
            raise gr.Error(str(err)) from err
        return {"model": info.name, "n_ctx": info.n_ctx, "layers": {c.endpoint: list(c.layers) for c in info.cards}}

    def load_progress() -> list[dict[str, Any]]:
        """While a model loads: per card, memory gained at the card against its share of the weights."""
        return ctx.admin.load_progress()

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
    gr.api(admin_login, api_name="admin_login", queue=False)
    gr.api(switch_model, api_name="switch_model", concurrency_limit=1)
    gr.api(set_cards, api_name="set_cards", concurrency_limit=1)
    gr.api(engine_settings, api_name="engine_settings", concurrency_limit=1)
    gr.api(ping_cards, api_name="ping_cards", queue=False)
    gr.api(load_progress, api_name="load_progress", queue=False)
    gr.api(cards, api_name="cards", queue=False)
    gr.api(status, api_name="status", queue=False)


def _owner(request: gr.Request | None) -> str:
    return f"api:{request.session_hash if request else 'anon'}"
