"""Named endpoints for gradio_client: `chat` (streams), `stop`, `history`, `cards` and `status`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gradio as gr

from app.admin import AdminDenied
from app.context import AppContext
from app.engine.events import EngineError
from app.ui import display
from app.ui.wiring import ENGINE_LISTENERS, ENGINE_QUEUE


def register(ctx: AppContext) -> None:
    def chat(
        message: str,
        conversation_id: str = "",
        system_prompt: str = "",
        max_tokens: int = 0,
        request: gr.Request = None,  # type: ignore[assignment]
    ) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """Stream an answer: yields (answer so far, conversation id, progress). Errors end the call."""
        store = ctx.chat.store
        cid = conversation_id or store.create(system_prompt or ctx.settings.system_prompt)
        if store.get(cid) is None:
            raise gr.Error(f"There is no conversation {cid}.")
        try:
            updates = ctx.chat.send(cid, message, owner=_owner(request), max_tokens=max_tokens or None)
        except ValueError as err:
            raise gr.Error(str(err)) from err
        for update in display.throttle(updates, ctx.settings.ui_updates_per_s):
            if update.error:
                raise gr.Error(update.error)
            progress = {
                "waiting": update.waiting,
                "held": update.held,
                "done": update.done,
                "stats": update.stats.as_dict() if update.stats else None,
            }
            yield update.text, cid, progress

    def stop(request: gr.Request = None) -> bool:  # type: ignore[assignment]
        """Stop the answer this client is waiting for; True if there was one."""
        return ctx.chat.stop(_owner(request))

    def history(conversation_id: str) -> list[dict[str, Any]]:
        """The saved messages of a conversation, oldest first."""
        if ctx.chat.store.get(conversation_id) is None:
            raise gr.Error(f"There is no conversation {conversation_id}.")
        return [
            {"role": m.role, "content": m.content, "status": m.status, "stats": m.stats}
            for m in ctx.chat.store.messages(conversation_id)
        ]

    def status() -> dict[str, Any]:
        """The loaded model and its layer count, the queue, and each card's state and layers."""
        return ctx.status()

    gr.api(chat, api_name="chat", concurrency_limit=ENGINE_LISTENERS, concurrency_id=ENGINE_QUEUE)
    gr.api(stop, api_name="stop", queue=False)
    def cards() -> list[dict[str, Any]]:
        """The latest sample of every card: state, load, temperature (None = no sensor), memory, layers, tok/s."""
        return [{k: v for k, v in card.items() if k != "health"} for card in ctx.status()["cards"]]

    def admin_login(password: str, request: gr.Request = None) -> str:  # type: ignore[assignment]
        """Open an admin session; returns the token that admin endpoints need."""
        try:
            return ctx.admin.login(password, who=_owner(request))
        except AdminDenied as err:
            raise gr.Error(str(err)) from err

    def switch_model(model_id: str, admin_token: str, request: gr.Request = None) -> dict[str, Any]:  # type: ignore[assignment]
        """Admin only: switch to a catalog model; the old one is unloaded first, and comes back on failure."""
        try:
            info = ctx.admin.switch_model(admin_token, model_id, who=_owner(request))
        except (AdminDenied, EngineError) as err:
            raise gr.Error(str(err)) from err
        return {"model": info.name, "n_ctx": info.n_ctx, "load_s": round(info.load_s, 2)}

    gr.api(admin_login, api_name="admin_login", queue=False)
    gr.api(switch_model, api_name="switch_model", concurrency_limit=1)
    gr.api(history, api_name="history", queue=False)
    gr.api(cards, api_name="cards", queue=False)
    gr.api(status, api_name="status", queue=False)


def _owner(request: gr.Request | None) -> str:
    return f"api:{request.session_hash if request else 'anon'}"
