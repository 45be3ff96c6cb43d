"""The chat feature's named endpoints (gradio_client): chat, stop, history, conversations.

Whose conversations a caller sees is `callers.owner_of`: with a login, that user's (the same as the
user's browsers); without one, the client's own (the token it keeps, else its session), never another's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gradio as gr

from app.chat.service import ChatService
from app.errors import QuartetError
from app.ui import display
from app.ui.callers import Owners, session_of
from app.ui.errors import explained
from app.ui.wiring import ENGINE_LISTENERS, ENGINE_QUEUE


def register(chat: ChatService, owners: Owners, *, updates_per_s: float) -> None:
    @explained
    def chat_(
        message: str,
        conversation_id: str = "",
        system_prompt: str = "",
        max_tokens: int = 0,
        request: gr.Request = None,  # type: ignore[assignment]
    ) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """Stream an answer: yields (answer so far, conversation id, progress). Errors end the call."""
        owner = owners.owner_of(request)
        cid = chat.open(conversation_id or None, owner=owner, system_prompt=system_prompt or None)
        updates = chat.send(cid, message, owner=owner, session=session_of(request), max_tokens=max_tokens or None)
        for update in display.throttle(updates, updates_per_s):
            if update.error:
                raise QuartetError(update.error, kind=update.kind or "engine", card=update.card)
            progress = {
                "waiting": update.waiting,
                "held": update.held,
                "reading": update.reading,
                "done": update.done,
                "stats": update.stats.as_dict() if update.stats else None,
            }
            yield update.text, cid, progress

    def stop(request: gr.Request = None) -> bool:  # type: ignore[assignment]
        """Stop the answer this client is waiting for; True if there was one."""
        return chat.stop(session_of(request))

    @explained
    def history(conversation_id: str, request: gr.Request = None) -> list[dict[str, Any]]:  # type: ignore[assignment]
        """The saved messages of one of the caller's conversations, oldest first."""
        messages = chat.history(conversation_id, owner=owners.owner_of(request))
        return [{"role": m.role, "content": m.content, "status": m.status, "stats": m.stats} for m in messages]

    def conversations(query: str = "", request: gr.Request = None) -> list[dict[str, str]]:  # type: ignore[assignment]
        """The caller's conversations, newest first (with `query`: those that contain it)."""
        return [
            {"id": c.id, "title": c.title, "updated_at": c.updated_at}
            for c in chat.recent(owners.owner_of(request), query=query)
        ]

    gr.api(chat_, api_name="chat", concurrency_limit=ENGINE_LISTENERS, concurrency_id=ENGINE_QUEUE)
    gr.api(stop, api_name="stop", queue=False)
    gr.api(history, api_name="history", queue=False)
    gr.api(conversations, api_name="conversations", queue=False)
