"""The admin feature's named endpoints (gradio_client): log in, switch models, cards, engine settings,
load progress. Every one but `load_progress` needs the token `admin_login` returns; the admin service
checks it."""

from __future__ import annotations

from typing import Any

import gradio as gr

from app.admin import AdminService
from app.ui.callers import throttle_key
from app.ui.errors import explained


def register(admin: AdminService) -> None:
    @explained
    def admin_login(password: str, request: gr.Request = None) -> str:  # type: ignore[assignment]
        """Open an admin session; returns the token that admin endpoints need."""
        return admin.login(password, who=_owner(request), client=throttle_key(request))

    @explained
    def switch_model(model_id: str, admin_token: str, request: gr.Request = None) -> dict[str, Any]:  # type: ignore[assignment]
        """Admin only: switch to a catalog model; the old one is unloaded first, and comes back on failure."""
        info = admin.switch_model(admin_token, model_id, who=_owner(request))
        return {"model": info.name, "n_ctx": info.n_ctx, "load_s": round(info.load_s, 2), "backend": info.backend}

    @explained
    def ping_cards(endpoints: list[str], admin_token: str) -> list[dict[str, Any]]:
        """Admin only: each endpoint's RPC port and health endpoint, changing nothing."""
        return admin.ping(admin_token, endpoints)

    @explained
    def set_cards(endpoints: list[str], admin_token: str, request: gr.Request = None) -> dict[str, Any]:  # type: ignore[assignment]
        """Admin only: run the model on these card endpoints (N ≥ 1); every one must answer first."""
        info = admin.set_cards(admin_token, endpoints, who=_owner(request))
        return {"model": info.name, "cards": [c.endpoint for c in info.cards], "load_s": round(info.load_s, 2)}

    @explained
    def engine_settings(changes: dict[str, Any], admin_token: str, request: gr.Request = None) -> dict[str, Any]:  # type: ignore[assignment]
        """Admin only: change n_ctx, n_threads, n_batch, n_ubatch, kv_type, tensor_split or parallel and
        reload (refused, with the numbers, when it would not fit the cards)."""
        info = admin.apply_settings(admin_token, dict(changes), who=_owner(request))
        return {"model": info.name, "n_ctx": info.n_ctx, "layers": {c.endpoint: list(c.layers) for c in info.cards}}

    def load_progress() -> list[dict[str, Any]]:
        """While a model loads: per card, memory gained at the card against its share of the weights."""
        return [row.model_dump() for row in admin.load_progress()]

    gr.api(admin_login, api_name="admin_login", queue=False)
    gr.api(switch_model, api_name="switch_model", concurrency_limit=1)
    gr.api(set_cards, api_name="set_cards", concurrency_limit=1)
    gr.api(engine_settings, api_name="engine_settings", concurrency_limit=1)
    gr.api(ping_cards, api_name="ping_cards", queue=False)
    gr.api(load_progress, api_name="load_progress", queue=False)


def _owner(request: gr.Request | None) -> str:
    return f"api:{request.session_hash if request else 'anon'}"
