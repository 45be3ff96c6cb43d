"""The admin feature's named endpoints (gradio_client): log in, switch models, cards, engine settings,
load progress, backup (the path of a one-time download out), restore (a file in), admin_logs. Every one but
`load_progress` needs the token `admin_login` returns; the admin service checks it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr

from app.admin import AdminService
from app.errors import Refused
from app.ui.callers import held, login_of, throttle_key
from app.ui.errors import explained


def register(admin: AdminService) -> None:
    @explained
    def admin_login(password: str, name: str = "", request: gr.Request = None) -> str:  # type: ignore[assignment]
        """Open an admin session; returns the token that admin endpoints need. `name` empty: the admin
        password of the settings; else a person with the admin role and their own password."""
        return admin.login(
            password, who=_owner(request), client=throttle_key(request), name=name, login=login_of(request)
        )

    @explained
    @held(admin.check_holder)
    def switch_model(model_id: str, admin_token: str, request: gr.Request = None) -> dict[str, Any]:  # type: ignore[assignment]
        """Admin only: switch to a catalog model; the old one is unloaded first, and comes back on failure."""
        info = admin.switch_model(admin_token, model_id, who=_owner(request))
        return {"model": info.name, "n_ctx": info.n_ctx, "load_s": round(info.load_s, 2), "backend": info.backend}

    @explained
    @held(admin.check_holder)
    def ping_cards(endpoints: list[str], admin_token: str, request: gr.Request = None) -> list[dict[str, Any]]:  # type: ignore[assignment]
        """Admin only: each endpoint's RPC port and health endpoint, changing nothing."""
        return admin.ping(admin_token, endpoints)

    @explained
    @held(admin.check_holder)
    def set_cards(endpoints: list[str], admin_token: str, request: gr.Request = None) -> dict[str, Any]:  # type: ignore[assignment]
        """Admin only: run the model on these card endpoints (N ≥ 1); every one must answer first."""
        info = admin.set_cards(admin_token, endpoints, who=_owner(request))
        return {"model": info.name, "cards": [c.endpoint for c in info.cards], "load_s": round(info.load_s, 2)}

    @explained
    @held(admin.check_holder)
    def engine_settings(changes: dict[str, Any], admin_token: str, request: gr.Request = None) -> dict[str, Any]:  # type: ignore[assignment]
        """Admin only: change n_ctx, n_threads, n_batch, n_ubatch, kv_type, tensor_split or parallel and
        reload (refused, with the numbers, when it would not fit the cards)."""
        info = admin.apply_settings(admin_token, dict(changes), who=_owner(request))
        return {"model": info.name, "n_ctx": info.n_ctx, "layers": {c.endpoint: list(c.layers) for c in info.cards}}

    @explained
    @held(admin.check_holder)
    def engine_settings_now(admin_token: str, request: gr.Request = None) -> dict[str, Any]:  # type: ignore[assignment]
        """Admin only: the engine settings the page changes, as they are now, and where each comes from."""
        return admin.engine_settings(admin_token)

    def load_progress() -> list[dict[str, Any]]:
        """While a model loads: per card, memory gained at the card against its share of the weights."""
        return [row.model_dump() for row in admin.load_progress()]

    @explained
    @held(admin.check_holder)
    def admin_logs(admin_token: str, request: gr.Request = None) -> dict[str, str]:  # type: ignore[assignment]
        """Admin only: the recent end of the app's log and of each local card agent's, by name."""
        return admin.logs(admin_token)

    @explained
    @held(admin.check_holder)
    def backup(admin_token: str, request: gr.Request) -> str:
        """Admin only: a backup archive of the database, documents and page-made settings, offered once to this
        admin session: returns its path, `/admin/downloads/<key>`, to GET within 10 minutes with the header
        `X-Quartet-Admin: <admin_token>` (the archive never passes through Gradio's file cache)."""
        return admin.backup(admin_token, who=_owner(request)).url

    @explained
    @held(admin.check_holder)
    def restore(archive: str | None, admin_token: str, request: gr.Request) -> str:
        """Admin only: check a backup archive whole and stage it; it replaces the data at the next start."""
        admin.check(admin_token)  # the session first: nothing is said to anyone else
        if not archive:
            raise Refused("Choose a backup archive (.tar.gz) first.")
        return admin.restore(admin_token, Path(archive), who=_owner(request))

    with gr.Group(visible=False):  # the file endpoints' inputs and outputs: an API, not a part of the page
        token_box, archive_box, archive_out, said = gr.Textbox(), gr.File(type="filepath"), gr.Textbox(), gr.Markdown()
        take, put = gr.Button(), gr.Button()
    take.click(backup, token_box, archive_out, api_name="backup", concurrency_limit=1)
    put.click(restore, [archive_box, token_box], said, api_name="restore", concurrency_limit=1)
    gr.api(admin_logs, api_name="admin_logs", queue=False)
    gr.api(engine_settings_now, api_name="engine_settings_now", queue=False)
    gr.api(admin_login, api_name="admin_login", queue=False)
    gr.api(switch_model, api_name="switch_model", concurrency_limit=1)
    gr.api(set_cards, api_name="set_cards", concurrency_limit=1)
    gr.api(engine_settings, api_name="engine_settings", concurrency_limit=1)
    gr.api(ping_cards, api_name="ping_cards", queue=False)
    gr.api(load_progress, api_name="load_progress", queue=False)


def _owner(request: gr.Request | None) -> str:
    return f"api:{request.session_hash if request else 'anon'}"
