"""Named endpoints for gradio_client: cards, status; admin. (The chat, documents and extraction
features register their own, beside their tabs.)"""

from __future__ import annotations

from typing import Any

import gradio as gr

from app.admin import AdminDenied
from app.context import AppContext
from app.engine.events import EngineError
from app.ui.callers import client_address


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
