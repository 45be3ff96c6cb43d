"""What a handler may know of its caller."""

from __future__ import annotations

import gradio as gr


def client_address(request: gr.Request | None) -> str:
    """The caller's network address (what login throttling counts by), "?" when unknown."""
    return request.client.host if request is not None and request.client else "?"


def throttle_key(request: gr.Request | None) -> str:
    """Whom wrong admin passwords are counted against: the login name (none without logins) and the
    address — never a session, which a client renews at will."""
    username = getattr(request, "username", None) if request is not None else None
    return f"{username or ''}@{client_address(request)}"


# A page whose load has not yet said whose it is (its browser id comes with the load's answer, which a
# loaded machine can deliver after the first click): it owns nothing and lists nothing. It must never fall
# back to "api", the named endpoints' owner: an early "New chat" listed their conversations, and a message
# sent before the load landed was filed under them, out of its own browser's list.
UNKNOWN_PAGE = "page:unknown"


def owner_of(request: gr.Request | None) -> str:
    """Whose conversations, for a client of the named endpoints: the login's, else ("api") everyone's
    without a login."""
    return _login(request) or "api"


def page_owner(request: gr.Request | None, browser_id: str | None) -> str:
    """Whose conversations, for a page: the login's when people log in, else the browser's own random id,
    else nobody's yet (UNKNOWN_PAGE)."""
    return _login(request) or (f"browser:{browser_id}" if browser_id else UNKNOWN_PAGE)


def _login(request: gr.Request | None) -> str | None:
    username = getattr(request, "username", None) if request is not None else None
    return f"user:{username}" if username else None


def session_of(request: gr.Request | None) -> str:
    """Who waits for an answer (what Stop cancels): one page or API session."""
    return (request.session_hash if request is not None else None) or "anon"
