"""The web server: FastAPI with the Gradio page mounted at / and plain routes beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fastapi
import gradio as gr
import uvicorn
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse

from app.api.openai_routes import build_router
from app.api.schemas import ApiError
from app.auth import login_check
from app.context import AppContext
from app.telemetry.metrics import render as render_metrics
from app.ui import admin_page, kiosk, page

ASSETS = Path(__file__).resolve().parent.parent / "assets"


def create_app(ctx: AppContext) -> fastapi.FastAPI:
    api = fastapi.FastAPI(title="Quartet", docs_url=None, redoc_url=None, openapi_url=None)

    _mount_openai(api, ctx)

    @api.get("/metrics", response_class=PlainTextResponse)
    def metrics() -> str:
        return render_metrics(ctx.status(), ctx.engine.counters.snapshot())

    @api.get("/health")
    def health() -> dict[str, Any]:
        status = ctx.status()
        return {"ok": True, "engine": status["state"], "message": status["message"]}

    reconnect = (ASSETS / "kiosk.js").read_text(encoding="utf-8")
    guard: dict[str, Any] = {
        "auth": login_check(ctx.settings.users),
        "max_file_size": ctx.settings.max_upload_mb * 1024 * 1024,
        "server_name": ctx.settings.host,
        "server_port": ctx.settings.port,
        "show_error": True,
        "ssr_mode": False,
    }
    booth = kiosk.build(ctx)
    booth.queue(default_concurrency_limit=1)
    gr.mount_gradio_app(
        api,
        booth,
        path="/kiosk",
        footer_links=[],
        css_paths=[ASSETS / "quartet.css", ASSETS / "kiosk.css"],
        js=reconnect,
        **guard,
    )
    office = admin_page.build(ctx)
    office.queue(default_concurrency_limit=1)
    gr.mount_gradio_app(api, office, path="/admin", footer_links=[], css_paths=[ASSETS / "quartet.css"], **guard)
    blocks = page.build(ctx)
    blocks.queue(default_concurrency_limit=1)
    return gr.mount_gradio_app(
        api,
        blocks,
        path="",
        footer_links=["api"],
        css_paths=[ASSETS / "quartet.css"],
        js=reconnect,
        **guard,
    )


def _mount_openai(api: fastapi.FastAPI, ctx: AppContext) -> None:
    api.include_router(build_router(ctx))

    @api.exception_handler(ApiError)
    def api_error(_request: fastapi.Request, err: ApiError) -> JSONResponse:
        return JSONResponse(err.body(), status_code=err.status)

    @api.exception_handler(RequestValidationError)
    def invalid(request: fastapi.Request, err: RequestValidationError) -> JSONResponse:
        first = err.errors()[0] if err.errors() else {}
        where = ".".join(str(part) for part in first.get("loc", ())[1:])
        message = f"{where}: {first.get('msg', 'invalid request')}" if where else "invalid request body"
        body = ApiError(400, message, type_="invalid_request_error", param=where or None).body()
        return JSONResponse(body, status_code=400)


def make_server(ctx: AppContext) -> uvicorn.Server:
    config = uvicorn.Config(
        create_app(ctx),
        host=ctx.settings.host,
        port=ctx.settings.port,
        log_level="warning",
        timeout_graceful_shutdown=3,
    )
    return uvicorn.Server(config)
