"""The web server: FastAPI with the Gradio page mounted at / and plain routes beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fastapi
import gradio as gr
import uvicorn

from app.context import AppContext
from app.ui import page

ASSETS = Path(__file__).resolve().parent.parent / "assets"


def create_app(ctx: AppContext) -> fastapi.FastAPI:
    api = fastapi.FastAPI(title="Quartet", docs_url=None, redoc_url=None, openapi_url=None)

    @api.get("/health")
    def health() -> dict[str, Any]:
        status = ctx.status()
        return {"ok": True, "engine": status["state"], "message": status["message"]}

    blocks = page.build(ctx)
    blocks.queue(default_concurrency_limit=1)
    return gr.mount_gradio_app(
        api,
        blocks,
        path="",
        server_name=ctx.settings.host,
        server_port=ctx.settings.port,
        footer_links=["api"],
        css_paths=[ASSETS / "quartet.css"],
        favicon_path=str(ASSETS / "logo.svg"),
        show_error=True,
        ssr_mode=False,
    )


def make_server(ctx: AppContext) -> uvicorn.Server:
    config = uvicorn.Config(
        create_app(ctx),
        host=ctx.settings.host,
        port=ctx.settings.port,
        log_level="warning",
        timeout_graceful_shutdown=3,
    )
    return uvicorn.Server(config)
