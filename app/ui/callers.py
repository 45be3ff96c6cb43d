"""What a handler may know of its caller."""

from __future__ import annotations

import gradio as gr


def client_address(request: gr.Request | None) -> str:
    """The caller's network address (what login throttling counts by), "?" when unknown."""
    return request.client.host if request is not None and request.client else "?"


def owner_of(request: gr.Request | None, browser_id: str | None = None) -> str:
    """Whose conversations: the login's when people log in, else the browser's own random id, else
    ("api") a client of the named endpoints without a login."""
    if request is not None and getattr(request, "username", None):
        return f"user:{request.username}"
    if browser_id:
        return f"browser:{browser_id}"
    return "api"


def session_of(request: gr.Request | None) -> str:
    """Who waits for an answer (what Stop cancels): one page or API session."""
    return (request.session_hash if request is not None else None) or "anon"
